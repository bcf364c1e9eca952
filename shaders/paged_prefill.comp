#version 460
// Paged attention for sequences of many query rows (prefill, chunked prefill),
// matrix paths. One workgroup per work item (paged_attention_io.glsl): PA_BM
// packed rows (16 per subgroup) of one sequence and kv head, over a range of
// keys. Unlike the decode kernel (paged_attention_subgroup.comp), whose
// subgroups each take their own 16-key tiles, here the subgroups share every
// K/V tile of PA_BN keys: the workgroup stages it once in shared memory
// (fp8 decoded there), and each subgroup multiplies it with its own 16 rows.
// That makes the work per byte read grow with the rows, not stay at 16.
//
// Per tile t, with two workgroup barriers:
//   - tile t + 1's K and V loads are issued into registers;
//   - S = Q K^T for the subgroup's rows (Q in registers, K from shared memory);
//   - logits, masks, the online softmax and P of tile t, then O += P V;
//   - barrier; tile t + 1's K and V are staged; barrier.
// In the modules with V_LAG (below) each tile's V is loaded and staged one
// tile later than its K, and tile t - 1's P V (its P carried in registers)
// runs beside tile t's softmax.
// The loads' latency hides behind a whole tile's products. Each subgroup
// holds its Q rows in registers (A matrices, head_size / 8 registers), read
// once through the K/V tiles' space before the key loop; K and V are read
// from shared memory. Keeping Q out of shared memory leaves room for tiles of
// 32 to 64 keys, so a tile's fixed costs (two barriers, the lookups) are
// shared by more products.
// The softmax runs in registers where the Context found the matrices'
// element order (each lane on its own elements of S by row, in the order
// abi/matrix_element_order.h gives). On the coopmat2 path per-element masks
// go through coopMatPerElementNV and P through VK_NV_cooperative_matrix2's
// accumulator -> A conversion; on the KHR path the masks take each
// element's row and column from the order, and P's A matrices are set
// element by element (an A matrix's element i lies where the accumulator's
// does). Without the order, the KHR module's S and P go through shared
// memory (each lane owns half a row there, as in the decode kernel), which
// leaves room for 4 subgroups, not 8. Either way the row sums add the
// rounded P that P V uses.
//
// The op (paged attention, or block-sparse attention with VKA_OP_BLOCK_SPARSE)
// gives the item, its tiles and their keys' logits: paged_attention_tiles.glsl
// says what it provides. Tiles no row of the item sees are never visited. A
// subgroup skips the products of tiles none of its rows sees, and tiles all
// its rows see whole run without masks when the op has no per-element logit
// terms there.
//
// Above head size 128 (PP_HEAD_PARTS), Q and O for 16 rows would not fit the
// registers beside S: a pair of subgroups shares each 16 rows, each holding
// Q and O for half the head. Each multiplies its half of Q by its half of K,
// the pair adds its two partial S through shared memory (one more barrier per
// tile), and both run the same softmax on the sums, each for its half of O.
//
// The K/V tile's values come through kv_source.glsl: the paged cache, or for
// prefix prefill's new-token pass the new tokens' K/V views, or block-sparse
// attention's K/V tensors.
// Non-finite V values: attention_nonfinite.glsl.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#if VKATTN_PATH == 2
#extension GL_NV_cooperative_matrix2 : require
#endif
#if PP_PHASE_PROFILE
#extension GL_ARB_shader_clock : require
#endif

#include "grid.glsl"
#define PA_PREFILL_KERNEL 1
// A bad block-table entry or block-list index reported after the key loop
// (deferred_report.glsl), in every module: a report where the lookup finds
// it sits in every tile's code even though it never runs.
#define PA_DEFERRED_BLOCK_REPORT 1
#if !VKA_OP_BLOCK_SPARSE && PA_MATRIX_BF16 && VKATTN_PATH == 2
// Prefix prefill's new-token keys outside an item read a stand-in row of
// the item's own new tokens, not a test of each piece's index before its
// load (kv_source.glsl). In the bf16 coopmat2 modules only: they ran
// faster with it, the f16 modules slower on most prefix-prefill shapes
// with the same registers, and the KHR modules were not measured with it
// (DEVELOPERS.md, "Stand-in rows for the new tokens' keys").
#define PP_SUFFIX_STAND_IN 1
#endif
#if VKA_OP_BLOCK_SPARSE
// Block-sparse attention: its items, K/V tensors, block lists and mods.
#include "abi/block_sparse.h"
#include "block_sparse_io.glsl"
#include "matrix_element.glsl"
#include "block_sparse_nonfinite.glsl"
#else
#include "abi/paged_attention.h"
#include "paged_attention_io.glsl"
#include "matrix_element.glsl"
#include "attention_nonfinite.glsl"
#include "kv_source.glsl"
#include "paged_attention_tiles.glsl"
#endif

#include "abi/matrix_element_order.h"

layout(local_size_x_id = 6) in;

// The softmax runs on each lane's own elements of S where the host found
// the element order abi/matrix_element_order.h assumes (PA_REGISTER_MATRICES:
// Capabilities::coopmat_register_order), on both matrix paths; else, on the
// KHR path, S and P go through shared memory. The coopmat2 module runs only
// with the order (detail::prefill_kernel_path), so its choice is a literal.
#if VKATTN_PATH == 2
const bool SHARED_SOFTMAX = false;
#else
const bool SHARED_SOFTMAX = PA_REGISTER_MATRICES == 0u;
#endif
const uint SM = SHARED_SOFTMAX ? 1u : 0u;
const uint D = PA_HEAD_SIZE;
const uint PARTS = PP_HEAD_PARTS(PA_HEAD_SIZE);   // subgroups sharing each 16 rows
const uint DT = PA_HEAD_SIZE / 16u / PARTS;       // 16-wide slices of the head a subgroup holds
const uint WG = PA_WORKGROUP_SIZE;
const uint NW = PA_WORKGROUP_SIZE / 32u;   // subgroups of 32, 16 rows each (or PARTS per 16 rows)
const uint BC = PA_BN;                // keys per tile
const uint CT = PA_BN / 16u;          // 16-key slices of a tile
const uint ROW = PP_ROW_VEC4(PA_HEAD_SIZE);
const uint V_AT = PA_BN * PP_ROW_VEC4(PA_HEAD_SIZE);   // the V tile's first uvec4
// 8-element pieces of a K or V tile, and how many each invocation loads (<= 8:
// the host picks BC so).
const uint PIECES = PA_BN * PA_HEAD_SIZE / 8u;
const uint PPT = (PA_BN * PA_HEAD_SIZE / 8u + PA_WORKGROUP_SIZE - 1u) / PA_WORKGROUP_SIZE;
// The same for Q's staging passes (at most BM rows each, through the K/V
// tiles' space): BM * D / 8 / WG = D / (16 * PARTS) = DT, at most 8. A
// piece is one 16-byte load where q's rows lie on 16-byte words, else eight
// 2-byte loads; QG pieces at a time, each group's loads issued before its
// stores. A rolled loop of load and store waited on every piece's round
// trip; of 1, 2, 4 and 8 pieces of 2-byte loads at a time, 2 ran fastest,
// and 8 (64 loads) slower than the rolled loop (DEVELOPERS.md, "The prefill
// kernel's fixed cost per item"). All 8 16-byte pieces at once (32
// registers live) made the bf16 module spill more in its key loop and run
// 8-10% slower (DEVELOPERS.md, "Q's 16-byte loads in groups").
const uint QPT = PA_HEAD_SIZE / 16u / PP_HEAD_PARTS(PA_HEAD_SIZE);
const uint QG = 2u;
// Each tile's V staged one tile after its K, and multiplied beside the next
// tile's softmax (V_LAG): on the coopmat2 path up to head size 128, in the
// paged op's f16-matrix modules whose staging does the most per tile: an fp8
// cache's (decoded as it is staged), which runs slower without it (prefix
// prefill's context pass is the paged op's module). Prefix prefill's
// new-token pass reads one source and decodes nothing: it ran faster in the
// paged f16 module's form (no lag, the loads after S, base 2), as did its
// bf16 module with each tile's entries read as the paged op's are
// (DEVELOPERS.md, "Prefix prefill in two passes"). Everywhere else each
// tile's V is staged with its K and multiplied within its own tile, which
// measured faster: plain f16 and every block-sparse module (once the
// epilogue stopped spilling); the bf16 modules, which the carried P pushed
// past 255 registers (the driver kept 9 per invocation in shared memory);
// the KHR module and the pairs of subgroups above head size 128 (16-key
// tiles). DEVELOPERS.md, "Tile t's softmax beside tile t - 1's P V" and "The
// V lag, module by module", has the figures. (Ternaries, not &&: glslang
// emits no spec-constant &&.)
#if VKATTN_PATH == 2 && !VKA_OP_BLOCK_SPARSE && !PA_MATRIX_BF16
const bool V_LAG = PP_HEAD_PARTS(PA_HEAD_SIZE) == 1u ? (PA_KV_SUFFIX != 0u ? false : PA_FP8_CACHE) : false;
#else
const bool V_LAG = false;
#endif
// Where the next tile's K/V loads are issued in the key loop: after this
// tile's S = Q K^T rather than before it, in the coopmat2 modules without
// the lag up to head size 128, where it measured faster (and took fewer
// registers); the lagged modules (prefix prefill, fp8 caches) were slower
// with it, and the KHR and head-pair modules were not measured with it
// (DEVELOPERS.md, "Keys outside the item read zeros, and the loads after S").
#if VKATTN_PATH == 2
const bool LOADS_AFTER_S = PP_HEAD_PARTS(PA_HEAD_SIZE) == 1u ? !V_LAG : false;
#else
const bool LOADS_AFTER_S = false;
#endif
// Each tile's block-table entries are read at tile t - 2, in the tile that
// locates it. (Read a tile earlier still and carried past the loop's back
// edge, bf16 prefix prefill's module had its registers back while it walked
// both sources: DEVELOPERS.md, "bf16 prefix prefill's block-table entries a
// tile earlier"; every other module was slower so.)
// KEY_TILES: the tiles whose keys key_at holds, located ahead of their
// loads. A literal per path, not a function of the head size
// (abi/paged_attention.h's PP_KEY_TILES says why): the coopmat2 path's
// modules without the lag keep its 3.
const uint KEY_TILES = PP_KEY_TILES(SM);

// The K and V tiles ([key][head_size] ELEMs, rows padded by 16 bytes; Q's
// rows before the key loop). uvec4: 16-byte stores.
shared uvec4 kv_stage[2u * PA_BN * PP_ROW_VEC4(PA_HEAD_SIZE)];
// The arrays that matrices are loaded from or stored to hold 16-byte
// elements (matrix_element.glsl's VKA_SHARED_WORD says why). The softmax
// through shared memory reads S and writes P a whole element at a time (4
// floats, 8 ELEMs), which each lane's run of a row starts on.
// Per subgroup: S [row][key] (SHARED_SOFTMAX), or its partial S (PARTS > 1): floats.
shared vec4 s_tile[PP_S_FLOATS(PA_HEAD_SIZE, PA_WORKGROUP_SIZE / 32u, PA_BN, SM) / 4u];
// Per subgroup: P [row][key] (SHARED_SOFTMAX): ELEMs, 8 to an element.
shared uvec4 p_tile[PP_P_ELEMS(PA_WORKGROUP_SIZE / 32u, PA_BN, SM) / 8u];
shared vec4 row_scale[4u * (PA_WORKGROUP_SIZE / 32u)];   // a float per row
#define ROW_SCALE(i) VKA_SHARED_WORD(row_scale, i)
shared float row_m[16u * (PA_WORKGROUP_SIZE / 32u)];
shared float row_l[16u * (PA_WORKGROUP_SIZE / 32u)];
// Where each key of KEY_TILES tiles starts (kv_source_locate): [tile % KEY_TILES][K, V][key].
shared uint64_t key_at[2u * KEY_TILES * PA_BN];
shared uint wg_flags[4];   // [0]: some V value was staged as 0 (attention_nonfinite.glsl)

#define MatQ coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>        // Q or P: rows x 16
#define MatB coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>        // K^T or V: 16 x 16
#define MatS coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>   // S or O slice

// Separate variables, not arrays, for the same reason as in the decode kernel:
// the driver keeps an array whose elements are partly unused in local memory.
#define SLICE_IF(F, j) if (j < DT) { F(j) }
#define EACH_SLICE(F) SLICE_IF(F, 0) SLICE_IF(F, 1) SLICE_IF(F, 2) SLICE_IF(F, 3) SLICE_IF(F, 4) \
  SLICE_IF(F, 5) SLICE_IF(F, 6) SLICE_IF(F, 7) SLICE_IF(F, 8) SLICE_IF(F, 9) SLICE_IF(F, 10)     \
  SLICE_IF(F, 11) SLICE_IF(F, 12) SLICE_IF(F, 13) SLICE_IF(F, 14) SLICE_IF(F, 15)
#define KEYS_IF(F, c) if (c < CT) { F(c) }
#define EACH_KEY_SLICE(F) KEYS_IF(F, 0) KEYS_IF(F, 1) KEYS_IF(F, 2) KEYS_IF(F, 3)

PaItem g_it;        // the work item (read by the per-element functions)
uint g_row0;        // the subgroup's first local row
uint g_slice0;      // the first 16-wide head slice it holds (PARTS > 1)
float g_scale;      // scale * k_scale

void subgroup_sync() {
  controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);
}

// Piece i of this invocation's part of the K or V tile of keys [k0, k0 + BC),
// located in key_at[buf]: piece c = invocation + i * WG is 8 head dims of key
// c / (D / 8). `src` is a constant where this is called (LOAD_K_FROM, LOAD_V_FROM), so
// that each source's loads are straight-line code.
uvec4 load_piece(uint src, int k0, uint buf, bool is_value, uint i) {
  const uint c = gl_LocalInvocationIndex + i * WG;
  if (i >= PPT || c >= PIECES) return uvec4(0);
  const uint j = c / (D / 8u);
  // Where WG is a multiple of D / 8 (head sizes 64, 128 and 256), each
  // invocation's pieces hold the same dims: their offset is found once.
  const uint d = ((WG % (D / 8u) == 0u ? gl_LocalInvocationIndex : c) % (D / 8u)) * 8u;
  return kv_source_raw8(src, key_at[(2u * buf + (is_value ? 1u : 0u)) * BC + j], is_value, k0 + int(j), g_it.kv_head, d);
}
// The pieces of the next K and V tile are separate variables of main (kr0..,
// vr0..), not arrays, for the reason SLICE_IF gives: with arrays of 8 of
// which 4 were used, the driver kept them in local memory, and every load was
// waited for where it was issued (DEVELOPERS.md). LOAD_PART(k0, buf, LOAD_K_FROM or
// LOAD_V_FROM) fills them from main's kv_src (pa_key_source), STAGE_PART stages them.
#define PIECE_IF(F, i) if (i < PPT) { F(i) }
#define EACH_PIECE(F) PIECE_IF(F, 0) PIECE_IF(F, 1) PIECE_IF(F, 2) PIECE_IF(F, 3) PIECE_IF(F, 4) \
  PIECE_IF(F, 5) PIECE_IF(F, 6) PIECE_IF(F, 7)
#define LOAD_K_PIECE(i) kr##i = load_piece(l_src, l_k0, l_buf, false, i);
#define LOAD_V_PIECE(i) vr##i = load_piece(l_src, l_k0, l_buf, true, i);
#define LOAD_PIECES_FROM(SRC, K0, BUF, EACH_LOAD) \
  {                                               \
    const uint l_src = SRC;                       \
    const int l_k0 = K0;                          \
    const uint l_buf = BUF;                       \
    EACH_LOAD                                     \
  }
#define LOAD_K_FROM(SRC, K0, BUF) LOAD_PIECES_FROM(SRC, K0, BUF, EACH_PIECE(LOAD_K_PIECE))
#define LOAD_V_FROM(SRC, K0, BUF) LOAD_PIECES_FROM(SRC, K0, BUF, EACH_PIECE(LOAD_V_PIECE))
#if VKA_OP_BLOCK_SPARSE
#define LOAD_PART(K0, BUF, FROM)                                                                   \
  if (kv_src == PA_SRC_CACHE) FROM(PA_SRC_CACHE, K0, BUF)                                          \
  else if (kv_src == PA_SRC_SUFFIX) FROM(PA_SRC_SUFFIX, K0, BUF)                                   \
  else FROM(PA_SRC_SUFFIX_NARROW, K0, BUF)
#else
// The paged op's tiles (and prefix prefill's context pass's) come from the
// cache; the new-token pass's from the new K/V views: 16-byte loads
// prefetched like the cache's, or, for views whose offsets or strides are
// not multiples of 8 elements (rare), 2-byte loads that STAGE_PART loads and
// stages in a rolled loop when the tile is staged, so that the key loop's
// code holds one source's prefetched loads.
#define LOAD_PART(K0, BUF, FROM)                                                                   \
  {                                                                                                \
    if (PA_PREFIX_PASS != PA_PASS_NEW_TOKENS && kv_src == PA_SRC_CACHE) FROM(PA_SRC_CACHE, K0, BUF) \
    else if (kv_src == PA_SRC_SUFFIX) FROM(PA_SRC_SUFFIX, K0, BUF)                                 \
  }
#endif

// Invocations below BC: where key k0 + invocation starts, from its entry, into key_at[buf].
void locate_tile(int k0, int entry, uint buf) {
  if (gl_LocalInvocationIndex >= BC) return;
  const int k = k0 + int(gl_LocalInvocationIndex);
  uint64_t k_at, v_at;
  kv_source_locate_entry(g_it, k, entry, k_at, v_at);
  key_at[2u * buf * BC + gl_LocalInvocationIndex] = k_at;
  key_at[(2u * buf + 1u) * BC + gl_LocalInvocationIndex] = v_at;
}
int tile_entry(int k0) { return gl_LocalInvocationIndex < BC ? kv_source_entry(g_it, k0 + int(gl_LocalInvocationIndex)) : -1; }

// Piece i of this invocation's part of Q's staging pass from row r0: 8 head
// dims of one row (0 past the pass); `wide`: pa_q_raw8's.
uvec4 q_piece(uint r0, uint i, bool wide) {
  const uint c = gl_LocalInvocationIndex + i * WG;
  if (c >= min(PA_BM, 2u * BC) * D / 8u) return uvec4(0);
  return pa_q_raw8(g_it, r0 + c / (D / 8u), (c % (D / 8u)) * 8u, wide);
}

// Piece i (raw, as loaded) of this invocation's part of a tile, stored at
// `at` in kv_stage as ELEMs; SUFFIX: whether it holds new tokens' values (q's
// dtype: stored as loaded) or the cache's (converted where the cache is fp8).
#define STORE_PIECE_BODY(SUFFIX)                     \
  const uint c = gl_LocalInvocationIndex + i * WG;   \
  if (i >= PPT || c >= PIECES) return;               \
  kv_stage[at + (c / (D / 8u)) * ROW + c % (D / 8u)] = elem8_from_key(SUFFIX, raw);
// STAGE_PART(K0, BUF, K, V): the K and/or V pieces loaded for the tile at K0 (K, V: true or false).
#if VKA_OP_BLOCK_SPARSE
// (Block-sparse K/V are q's dtype, stored as loaded either way; this form
// keeps its modules byte for byte what they were timed as.)
void store_piece(uvec4 raw, uint at, uint i) { STORE_PIECE_BODY(pa_suffix_item(g_it)) }
#define STORE_K_PIECE(i) store_piece(kr##i, 0u, i);
#define STORE_V_PIECE(i) store_piece(vr##i, V_AT, i);
#define STAGE_PART(K0, BUF, K, V) \
  if (K) { EACH_PIECE(STORE_K_PIECE) } \
  if (V) { EACH_PIECE(STORE_V_PIECE) }
#else
void store_piece(uvec4 raw, uint at, uint i, bool suffix) { STORE_PIECE_BODY(suffix) }
#define STORE_K_PIECE(i) store_piece(kr##i, 0u, i, s_suffix);
#define STORE_V_PIECE(i) store_piece(vr##i, V_AT, i, s_suffix);
#define STAGE_PIECES(K, V, SUFFIX)       \
  {                                      \
    const bool s_suffix = SUFFIX;        \
    if (K) { EACH_PIECE(STORE_K_PIECE) } \
    if (V) { EACH_PIECE(STORE_V_PIECE) } \
  }
// A tile LOAD_PART leaves (PA_SRC_SUFFIX_NARROW), loaded and staged here.
void stage_rolled(int k0, uint buf, bool k, bool v) {
  [[dont_unroll]] for (uint i = 0; i < PPT; ++i) {
    if (k) store_piece(load_piece(PA_SRC_SUFFIX_NARROW, k0, buf, false, i), 0u, i, pa_suffix_item(g_it));
    if (v) store_piece(load_piece(PA_SRC_SUFFIX_NARROW, k0, buf, true, i), V_AT, i, pa_suffix_item(g_it));
  }
}
// An fp8 cache's suffix items (prefix prefill's new tokens, in q's dtype)
// stage their pieces in code of their own: with the choice made per piece
// (elem8_from_key's), the conversion ran for them too.
#define STAGE_PART(K0, BUF, K, V)                                                                  \
  {                                                                                                \
    if (kv_src == PA_SRC_SUFFIX_NARROW) stage_rolled(K0, BUF, K, V);                                \
    else if (PA_FP8_CACHE && pa_suffix_item(g_it)) STAGE_PIECES(K, V, true)                        \
    else STAGE_PIECES(K, V, false)                                                                 \
  }
#endif

// Replaces the staged V tile's non-finite values by 0; returns whether this
// invocation replaced any.
bool zero_staged_nonfinite() {
  bool any = false;
  for (uint i = 0; i < PPT; ++i) {
    const uint c = gl_LocalInvocationIndex + i * WG;
    if (c >= PIECES) continue;
    const uint at = V_AT + (c / (D / 8u)) * ROW + c % (D / 8u);
    const uvec4 h = kv_stage[at], f = elem8_finite_or_zero(h);
    if (f != h) {
      kv_stage[at] = f;
      any = true;
    }
  }
  return any;
}

// The logit of score s (q.k, unscaled) for the subgroup's row r at key k of tile t.
float masked_logit(uint r, int k, float s, int t) { return pa_item_logit(g_it, g_row0 + r, k, s * g_scale, t); }

// The register softmax's logits, in base 2 (the comment above SOFTMAX).
float cm_logit(const in uint r, const in uint c, const in float s, const in int k0, const in int t) {
  return masked_logit(r, k0 + int(c), s, t) * VKA_LOG2E;
}
// Whether element i of a lane's part of a 16 x 16 accumulator lies in row
// lane / 4 + 8 rather than lane / 4: the order the Context found on the
// device (abi/matrix_element_order.h, Capabilities::coopmat_register_order),
// without which the softmax goes through shared memory (SHARED_SOFTMAX).
bool acc_row_hi(uint i) { return MEO_ROW(0u, i) >= 8u; }
// Per-element logits of a tile's 16-key slice c that a mask cuts. The KHR
// path's by each element's row and column in the order (the probe checks an
// accumulator's whole positions).
#if VKATTN_PATH == 2
#define LOGITS_MASKED(c) coopMatPerElementNV(s##c, s##c, cm_logit, k0 + 16 * c, t);
#else
#define LOGITS_MASKED(c)                                                                            \
      [[unroll]] for (uint i = 0; i < 8u; ++i) {                                                    \
        const uint at = MEO_POSITION(lane, i);                                                      \
        s##c[i] = cm_logit(at / 16u, at % 16u, s##c[i], k0 + 16 * c, t);                            \
      }
#endif
#define LOGITS_WHOLE(c) s##c = s##c * (g_scale * VKA_LOG2E);

// The key loop's steps, for one 16-wide head slice j or 16-key slice c.
#define S_MUL_AT(c, j)                                                                               \
      {                                                                                              \
        MatB kb;                                                                                     \
        coopMatLoad(kb, kv_stage, (16u * c) * ROW + 2u * (g_slice0 + j), ROW, gl_CooperativeMatrixLayoutColumnMajor); \
        s##c = coopMatMulAdd(q##j, kb, s##c);                                                        \
      }
#define S_FOR(j) \
  if (0 < CT) S_MUL_AT(0, j) if (1 < CT) S_MUL_AT(1, j) if (2 < CT) S_MUL_AT(2, j) if (3 < CT) S_MUL_AT(3, j)
// O += P V for the previous tile (P: pp0.., V staged at V_AT).
#define PV_MUL_AT(c, j)                                                                              \
      {                                                                                              \
        MatB vb;                                                                                     \
        coopMatLoad(vb, kv_stage, V_AT + (16u * c) * ROW + 2u * (g_slice0 + j), ROW, gl_CooperativeMatrixLayoutRowMajor); \
        o##j = coopMatMulAdd(pp##c, vb, o##j);                                                       \
      }
#define PV_FOR(j) \
  if (0 < CT) PV_MUL_AT(0, j) if (1 < CT) PV_MUL_AT(1, j) if (2 < CT) PV_MUL_AT(2, j) if (3 < CT) PV_MUL_AT(3, j)
#define STORE_PART(c) coopMatStore(s##c, s_tile, (s_at + 16u * c) / 4u, BC / 4u, gl_CooperativeMatrixLayoutRowMajor);
#define ADD_PARTNER(c)                                                                              \
        {                                                                                           \
          MatS part;                                                                                \
          coopMatLoad(part, s_tile, (partner_at + 16u * c) / 4u, BC / 4u, gl_CooperativeMatrixLayoutRowMajor); \
          s##c = s##c + part;                                                                       \
        }
// The softmax of tile t on each lane's own elements of S (rows g = lane / 4
// and g + 8, 8 elements per 16-key slice, each row's 16 keys over 4 lanes):
// the row max and sum over the lane's elements, then over the row's 4
// lanes by two shuffles; m, l and alpha are two floats per lane. Through the
// driver's row reductions and per-element operations (16 x 16 accumulators
// for m, l and alpha) it took 11 more registers, which this loop's carried
// P needs; alone, the by-hand form was 6% slower (DEVELOPERS.md).
// In base 2 the logits are held times log2(e) (the score
// factor and cm_logit take it), so each P is exp2 of one subtraction from
// its row's base: the max, or 0 for a row that has seen no key (whose
// logits are all -inf), which spares each element vka_exp_diff's test and
// multiply, as FlashAttention's softmax_scale_log2 does; m goes back to
// natural units where the loop ends.
#define ROW_MAX(c)                                                                                  \
      [[unroll]] for (uint i = 0; i < 8u; ++i) {                                                    \
        if (acc_row_hi(i)) mx_hi = max(mx_hi, s##c[i]); else mx_lo = max(mx_lo, s##c[i]);           \
      }
#define MAKE_P(c)                                                                                   \
      [[unroll]] for (uint i = 0; i < 8u; ++i) {                                                    \
        const bool hi = acc_row_hi(i);                                                              \
        const float pr = float(ELEM(exp2(s##c[i] - (hi ? base_hi : base_lo))));                   \
        s##c[i] = pr;                                                                               \
        if (hi) sum_hi += pr; else sum_lo += pr;   /* the rounded P that P V uses */                \
      }                                                                                             \
      SET_P(c)
// P's A matrices from S's elements: coopmat2's accumulator -> A conversion,
// or on the KHR path element by element (A's element i lies where the
// accumulator's does: abi/matrix_element_order.h).
#if VKATTN_PATH == 2
#define SET_P(c) p##c = MatQ(s##c);
#else
#define SET_P(c) [[unroll]] for (uint i = 0; i < 8u; ++i) p##c[i] = ELEM(s##c[i]);
#endif
#define REGISTER_SOFTMAX()                                                                          \
      float mx_lo = VKA_NEG_INF, mx_hi = VKA_NEG_INF;                                               \
      EACH_KEY_SLICE(ROW_MAX)                                                                       \
      mx_lo = max(mx_lo, subgroupShuffleXor(mx_lo, 1u));                                            \
      mx_hi = max(mx_hi, subgroupShuffleXor(mx_hi, 1u));                                            \
      mx_lo = max(mx_lo, subgroupShuffleXor(mx_lo, 2u));                                            \
      mx_hi = max(mx_hi, subgroupShuffleXor(mx_hi, 2u));                                            \
      a_lo = vka_softmax_rescale_log2(m_lo, l_lo, mx_lo);                                           \
      a_hi = vka_softmax_rescale_log2(m_hi, l_hi, mx_hi);                                           \
      const float base_lo = m_lo == VKA_NEG_INF ? 0.0 : m_lo, base_hi = m_hi == VKA_NEG_INF ? 0.0 : m_hi; \
      float sum_lo = 0.0, sum_hi = 0.0;                                                             \
      EACH_KEY_SLICE(MAKE_P)                                                                        \
      sum_lo += subgroupShuffleXor(sum_lo, 1u);                                                     \
      sum_hi += subgroupShuffleXor(sum_hi, 1u);                                                     \
      sum_lo += subgroupShuffleXor(sum_lo, 2u);                                                     \
      sum_hi += subgroupShuffleXor(sum_hi, 2u);                                                     \
      l_lo += sum_lo;                                                                               \
      l_hi += sum_hi;
#define REGISTER_RESCALE(j) [[unroll]] for (uint i = 0; i < 8u; ++i) o##j[i] *= acc_row_hi(i) ? a_hi : a_lo;
#if VKATTN_PATH == 2
#define SOFTMAX() REGISTER_SOFTMAX()
#define RESCALE(j) REGISTER_RESCALE(j)
#else
// The softmax of tile t through shared memory (SHARED_SOFTMAX): lane pairs
// own a row, half its keys each; P is read back as A matrices, alpha as a
// matrix whose element (r, d) is row r's.
#define LOAD_P(c) coopMatLoad(p##c, p_tile, (s_at + 16u * c) / 8u, BC / 8u, gl_CooperativeMatrixLayoutRowMajor);
#define SHARED_MEMORY_SOFTMAX()                                                                     \
      float x[32];                                                                                  \
      float tile_max = VKA_NEG_INF;                                                                 \
      [[unroll]] for (uint i = 0; i < 32u; i += 4u) {                                               \
        if (i >= BC / 2u) break;                                                                    \
        const uint at = (my_row * BC + my_c0 + i) / 4u;                                             \
        const vec4 s4 = PARTS > 1u ? s_tile[s_at / 4u + at] + s_tile[partner_at / 4u + at] : s_tile[s_at / 4u + at]; \
        [[unroll]] for (uint j = 0; j < 4u; ++j) {                                                  \
          x[i + j] = whole ? s4[j] * g_scale : masked_logit(my_row, k0 + int(my_c0 + i + j), s4[j], t); \
          tile_max = max(tile_max, x[i + j]);                                                       \
        }                                                                                           \
      }                                                                                             \
      tile_max = max(tile_max, subgroupShuffleXor(tile_max, 1u));                                   \
      const float alpha = vka_softmax_rescale(m, l, tile_max);                                      \
      float sum = 0.0;                                                                              \
      [[unroll]] for (uint i = 0; i < 32u; i += 8u) {                                               \
        if (i >= BC / 2u) break;                                                                    \
        uvec4 eight;                                                                                \
        [[unroll]] for (uint j = 0; j < 4u; ++j) {                                                  \
          const ELEM p0 = ELEM(vka_exp_diff(x[i + 2u * j], m)), p1 = ELEM(vka_exp_diff(x[i + 2u * j + 1u], m)); \
          eight[j] = elem_pair_bits(float(p0), float(p1));                                          \
          sum += float(p0);   /* the rounded P that P V uses */                                     \
          sum += float(p1);                                                                         \
        }                                                                                           \
        p_tile[(s_at + my_row * BC + my_c0 + i) / 8u] = eight;                                      \
      }                                                                                             \
      l += sum + subgroupShuffleXor(sum, 1u);                                                       \
      if (lane % 2u == 0u) ROW_SCALE(warp * 16u + my_row) = alpha;                                  \
      subgroup_sync();                                                                              \
      coopMatLoad(am, row_scale, warp * 4u, 0u, gl_CooperativeMatrixLayoutColumnMajor);             \
      EACH_KEY_SLICE(LOAD_P)
#define SOFTMAX() if (SHARED_SOFTMAX) { SHARED_MEMORY_SOFTMAX() } else { REGISTER_SOFTMAX() }
#define RESCALE(j) if (SHARED_SOFTMAX) { o##j = o##j * am; } else { REGISTER_RESCALE(j) }
#endif

// The phase profile of developers' builds (abi/phase_profile.h): PROF(X)
// adds the cycles since the last mark to the subgroup's count of phase
// PP_PROFILE_X. Nothing in other builds.
#if PP_PHASE_PROFILE
#include "abi/phase_profile.h"
uint prof_t, prof_PROLOGUE = 0u, prof_TILE_START = 0u, prof_S = 0u, prof_LOADS = 0u, prof_SOFTMAX = 0u, prof_PV = 0u,
     prof_LOCATE = 0u, prof_BARRIER_1 = 0u, prof_STAGING = 0u, prof_BARRIER_2 = 0u, prof_EPILOGUE = 0u;
#define PROF(X) { const uint prof_now = clock2x32ARB().x; prof_##X += prof_now - prof_t; prof_t = prof_now; }
#define PROF_ADD(X) atomicAdd(vka_status[PP_PROFILE_WORD0 + PP_PROFILE_##X], prof_##X >> PP_PROFILE_SHIFT);
void prof_report(int tiles) {
  PROF(EPILOGUE)
  if (gl_SubgroupInvocationID == 0u) {
    PROF_ADD(PROLOGUE) PROF_ADD(TILE_START) PROF_ADD(S) PROF_ADD(LOADS) PROF_ADD(SOFTMAX) PROF_ADD(PV)
    PROF_ADD(LOCATE) PROF_ADD(BARRIER_1) PROF_ADD(STAGING) PROF_ADD(BARRIER_2) PROF_ADD(EPILOGUE)
    atomicAdd(vka_status[PP_PROFILE_WORD0 + PP_PROFILE_TILES], uint(tiles));
    atomicAdd(vka_status[PP_PROFILE_WORD0 + PP_PROFILE_ITEMS], 1u);
  }
}
#else
#define PROF(X)
#endif

void main() {
#if PP_PHASE_PROFILE
  prof_t = clock2x32ARB().x;
#endif
  const uint linear = vka_linear_workgroup(pc.grid_x);
  if (linear >= pc.num_workgroups) return;
  // The last items first: a sequence's later rows see more keys.
  const uint item = pc.num_workgroups - 1u - linear;
  if (gl_SubgroupSize != 32u) {   // rows map to subgroups of 32
    if (gl_LocalInvocationIndex == 0u) vka_report(STATUS_SUBGROUP_SIZE, gl_SubgroupSize, 32u, 0u);
    return;
  }
  const uint tid = gl_LocalInvocationIndex, warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  g_it = pa_load_item(item);
  if (!g_it.valid) return;   // the same for the whole workgroup
  g_row0 = 16u * (warp / PARTS);
  g_slice0 = (warp % PARTS) * DT;
  g_scale = pa_score_scale(g_it);
  const int num_tiles = pa_tile_count(g_it);
  const PaTiles tiles = pa_tiles_setup(g_it);
  const PaRows rows = pa_subgroup_setup(g_it, g_row0);   // this subgroup's rows
  const bool has_rows = g_row0 < g_it.row_count;

  if (tid == 0u) wg_flags[0] = 0u;
  pa_bad_block_init();
  // The prologue's loads go out together, before anything waits on one: the
  // chunk table's first entries, the first two tiles' keys and block-table
  // entries, Q (and the documents' ids). A store of a load's value waits
  // for it, so each is stored after all are issued; issued in turn, each
  // behind the last one's store, they were a chain of round trips that
  // nothing overlaps (one workgroup per SM).
  const uint64_t chunk_base = pa_fetch_chunk_base();
  const int first = num_tiles > 0 ? pa_tile_key0(g_it, 0) : 0, second = num_tiles > 1 ? pa_tile_key0(g_it, 1) : 0;
  const int first_entry = num_tiles > 0 ? tile_entry(first) : -1, second_entry = num_tiles > 1 ? tile_entry(second) : -1;
  // Q: staged in the K/V tiles' space, as many rows at a time as it holds
  // (2 * BC: whole subgroups' 16 rows, as BC is a multiple of 16), then
  // held as A slices. A piece is one 16-byte load where q's rows lie on
  // 16-byte words (pa_q_wide), else eight 2-byte loads; either way QG
  // pieces at a time, each group's loads issued before its stores.
  MatQ q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11, q12, q13, q14, q15;
  const bool q_wide = pa_q_wide();
  const uint QR = min(PA_BM, 2u * BC);
  for (uint r0 = 0u; r0 < PA_BM; r0 += QR) {
    uvec4 qw0, qw1, qw2, qw3, qw4, qw5, qw6, qw7;
#define Q_PIECE_IF(F, i) if (i < QPT) { F(i) }
#define EACH_Q_PIECE(F) Q_PIECE_IF(F, 0) Q_PIECE_IF(F, 1) Q_PIECE_IF(F, 2) Q_PIECE_IF(F, 3) \
  Q_PIECE_IF(F, 4) Q_PIECE_IF(F, 5) Q_PIECE_IF(F, 6) Q_PIECE_IF(F, 7)
#define LOAD_Q_PIECE(i) if (i / QG == g) qw##i = q_piece(r0, i, q_wide);
#define STORE_Q_PIECE(i) if (i / QG == g) { const uint c = tid + i * WG; if (c < QR * D / 8u) kv_stage[(c / (D / 8u)) * ROW + c % (D / 8u)] = qw##i; }
    [[unroll]] for (uint g = 0u; g < (QPT + QG - 1u) / QG; ++g) {
      EACH_Q_PIECE(LOAD_Q_PIECE)
      if (r0 == 0u && g == 0u) {   // (stored after Q's first loads are issued)
#if VKA_OP_BLOCK_SPARSE && BS_STAGED_DOCUMENTS
        bs_stage_row_documents(g_it);
        if (num_tiles > 0) bs_stage_key_documents(g_it, first, 0);
        if (num_tiles > 1) bs_stage_key_documents(g_it, second, 1);
#endif
        pa_store_chunk_bases(chunk_base);
      }
      EACH_Q_PIECE(STORE_Q_PIECE)
    }
    barrier();
    if (r0 == 0u) {   // tiles 0 and 1 located (the chunk bases' stores are ordered by the barrier)
      if (num_tiles > 0) locate_tile(first, first_entry, 0u);
      if (num_tiles > 1) locate_tile(second, second_entry, 1u);
    }
    if (g_row0 >= r0 && g_row0 < r0 + QR) {
#define LOAD_Q(j) coopMatLoad(q##j, kv_stage, (g_row0 - r0) * ROW + 2u * (g_slice0 + j), ROW, gl_CooperativeMatrixLayoutRowMajor);
      EACH_SLICE(LOAD_Q)
    }
    barrier();   // the space is the K/V tiles' from here; key_at's first two tiles are written
  }

  MatS o0 = MatS(0.0), o1 = o0, o2 = o0, o3 = o0, o4 = o0, o5 = o0, o6 = o0, o7 = o0, o8 = o0, o9 = o0,
       o10 = o0, o11 = o0, o12 = o0, o13 = o0, o14 = o0, o15 = o0;
  float m_lo = VKA_NEG_INF, m_hi = VKA_NEG_INF, l_lo = 0.0, l_hi = 0.0;   // rows lane / 4 and lane / 4 + 8
#if VKATTN_PATH != 2
  float m = VKA_NEG_INF, l = 0.0;   // SHARED_SOFTMAX: this lane's row (lane / 2)
  const uint my_row = lane / 2u, my_c0 = (lane % 2u) * (BC / 2u);
#endif
  bool staged_nonfinite = false;

  uvec4 kr0 = uvec4(0), kr1 = kr0, kr2 = kr0, kr3 = kr0, kr4 = kr0, kr5 = kr0, kr6 = kr0, kr7 = kr0;
  uvec4 vr0 = kr0, vr1 = kr0, vr2 = kr0, vr3 = kr0, vr4 = kr0, vr5 = kr0, vr6 = kr0, vr7 = kr0;
  const uint kv_src = pa_key_source(g_it);
  // Tile 0's K staged (and its V without V_LAG).
  // With V_LAG each tile's V is staged one tile after its K: in the loop,
  // tile t's S and softmax run with tile t's K and tile t - 1's V in shared
  // memory, and tile t - 1's P V (P carried in registers) beside tile t's
  // softmax, which it does not depend on.
  // The barriers keep the subgroups in step, so that without this every
  // subgroup ran its softmax at the same time, the matrix units idle
  // (DEVELOPERS.md, "Tile t's softmax beside tile t - 1's P V"). After tile
  // t's products, tile t's V and tile t + 1's K (loaded at its start) are
  // staged. key_at then holds three tiles' keys: tile t's V and tile t + 1's
  // K are loaded while tile t + 2's are located (two tiles' without V_LAG).
  if (num_tiles > 0) {
    LOAD_PART(first, 0u, LOAD_K_FROM)
    if (!V_LAG) {
      LOAD_PART(first, 0u, LOAD_V_FROM)
    }
    STAGE_PART(first, 0u, true, !V_LAG)
  }
  barrier();
  // Where the op reads its tiles' keys from memory (PA_TILE_KEY_LOADS), the
  // next two tiles' keys are carried from tile to tile, each read once: the
  // reads were in the chain before each tile's loads. Computed keys are
  // computed where used: carried, they made the paged kernel 3% slower (not
  // traced; DEVELOPERS.md, "The prefill kernel's fixed cost per item").
  // (A preprocessor choice: the paged kernel's code holds no trace of it.)
#if PA_TILE_KEY_LOADS
  int carried_k0 = first, carried_k1 = second;
#endif
  MatQ pp0, pp1, pp2, pp3;   // the previous tile's P
  bool prev_pv = false;      // whether this subgroup multiplies the previous tile's P and V
  int prev_k0 = 0;
  uint buf = 0u;             // tile t's third of key_at (t % 3)
  PROF(PROLOGUE)
  for (int t = 0; t < num_tiles; ++t) {
#if PA_TILE_KEY_LOADS
    const int k0 = carried_k0, k1 = carried_k1;
#else
    const int k0 = pa_tile_key0(g_it, t);
    const int k1 = t + 1 < num_tiles ? pa_tile_key0(g_it, t + 1) : 0;
#endif
    const int k2 = t + 2 < num_tiles ? pa_tile_key0(g_it, t + 2) : 0;
#if PA_TILE_KEY_LOADS
    carried_k0 = k1;
    carried_k1 = k2;
#endif
    const bool more = t + 1 < num_tiles;
    const uint buf1 = buf == KEY_TILES - 1u ? 0u : buf + 1u, buf2 = buf1 == KEY_TILES - 1u ? 0u : buf1 + 1u;
    // The tile whose V this tile loads (and stages after its products).
    const int kv = V_LAG ? k0 : k1;
    const uint bufv = V_LAG ? buf : buf1;
    const bool v_next = V_LAG || more;
    // Some row sees part of the tile whose V is staged now (the previous
    // tile with V_LAG): non-finite V values must not reach the rows that do
    // not see them.
    if (V_LAG ? t > 0 && pa_tile_partly_seen(g_it, tiles, t - 1, prev_k0) : pa_tile_partly_seen(g_it, tiles, t, k0)) {
      if (zero_staged_nonfinite()) staged_nonfinite = true;
      barrier();
    }
    // In flight during this tile's products: tile t + 1's K, and tile t's
    // V (t + 1's without V_LAG); issued here or after S (LOADS_AFTER_S).
#define LOAD_NEXT()                              \
    if (more) LOAD_PART(k1, buf1, LOAD_K_FROM)   \
    if (v_next) LOAD_PART(kv, bufv, LOAD_V_FROM)
    if (!LOADS_AFTER_S) {
      LOAD_NEXT()
    }
    const int ahead = t + 2 < num_tiles ? tile_entry(k2) : -1;
    // This subgroup: nothing to see in the tile, or all of it with no mask.
    const bool skip = pa_subgroup_skips(g_it, rows, t, k0);
    const bool whole = pa_subgroup_whole(g_it, rows, t, k0);
    PROF(TILE_START)

    // S = Q K^T, one 16-wide head slice of Q at a time.
    MatS s0 = MatS(0.0), s1 = s0, s2 = s0, s3 = s0;
    if (!skip) {
      EACH_SLICE(S_FOR)
    }
    PROF(S)
    if (LOADS_AFTER_S) {
      LOAD_NEXT()
    }
    PROF(LOADS)
    // A pair's partial S: each stores its own, and adds its partner's.
    const uint s_at = warp * 16u * BC, partner_at = (warp ^ 1u) * 16u * BC;
#if VKATTN_PATH != 2
    MatS am;
    if (SHARED_SOFTMAX) {
      if (!skip) {
        EACH_KEY_SLICE(STORE_PART)
      }
      if (PARTS > 1u) barrier();
      else subgroup_sync();
    } else
#endif
    {
      if (PARTS > 1u) {
        if (!skip) {
          EACH_KEY_SLICE(STORE_PART)
        }
        barrier();
        if (!skip) {
          EACH_KEY_SLICE(ADD_PARTNER)
        }
      }
      if (!skip) {
        if (whole) {
          EACH_KEY_SLICE(LOGITS_WHOLE)
        } else {
          EACH_KEY_SLICE(LOGITS_MASKED)
        }
      }
    }
    float a_lo, a_hi;
    MatQ p0, p1, p2, p3;
    if (V_LAG) {
      // Tile t's softmax and tile t - 1's P V: one block where a subgroup has both.
      if (!skip && prev_pv) {
        EACH_SLICE(PV_FOR)
        SOFTMAX()
        EACH_SLICE(RESCALE)
      } else if (!skip) {
        SOFTMAX()
        EACH_SLICE(RESCALE)
      } else if (prev_pv) {
        EACH_SLICE(PV_FOR)
      }
      if (!skip) {
        pp0 = p0; pp1 = p1; pp2 = p2; pp3 = p3;
      }
    } else if (!skip) {   // tile t's softmax, then its P V
      SOFTMAX()
      EACH_SLICE(RESCALE)
      pp0 = p0; pp1 = p1; pp2 = p2; pp3 = p3;
      PROF(SOFTMAX)
      EACH_SLICE(PV_FOR)
    }
    PROF(PV)
    prev_pv = !skip;
    prev_k0 = k0;
    // Tile t + 2's addresses, in the third that neither this tile's loads nor the last's read.
    if (t + 2 < num_tiles) {
      locate_tile(k2, ahead, buf2);
#if VKA_OP_BLOCK_SPARSE && BS_STAGED_DOCUMENTS
      bs_stage_key_documents(g_it, k2, t + 2);   // (with its keys, two tiles ahead)
#endif
    }
    PROF(LOCATE)
    barrier();   // every subgroup is done with the staged K and V
    PROF(BARRIER_1)
    if (v_next) {
      STAGE_PART(kv, bufv, false, true)
    }
    if (more) {
      STAGE_PART(k1, buf1, true, false)
    }
    PROF(STAGING)
    barrier();
    PROF(BARRIER_2)
    buf = buf1;
  }
  if (V_LAG && num_tiles > 0) {   // the last tile's P V
    if (pa_tile_partly_seen(g_it, tiles, num_tiles - 1, prev_k0)) {
      if (zero_staged_nonfinite()) staged_nonfinite = true;
      barrier();
    }
    if (prev_pv) {
      EACH_SLICE(PV_FOR)
    }
  }

  // Each lane writes 8 dims of one row of O below: lane 2 r + h takes row r,
  // dims 8 h .. 8 h + 7 of each slice.
  const uint w_row = lane / 2u, w_dim = 8u * (lane % 2u);
#if !VKA_OP_BLOCK_SPARSE
  // Prefix prefill's new-token pass: the context pass's partial results for
  // this lane's rows, (m, l) of row g_row0 + lane and O's dims where the lane
  // writes, their loads all issued here, before anything waits on one.
  const bool after_context = PA_PREFIX_PASS == PA_PASS_NEW_TOKENS && g_it.after_context;
  vec2 context_stats = vec2(VKA_NEG_INF, 0.0);
  vec4 cl0 = vec4(0.0), cl1 = cl0, cl2 = cl0, cl3 = cl0, cl4 = cl0, cl5 = cl0, cl6 = cl0, cl7 = cl0, cl8 = cl0, cl9 = cl0,
       cl10 = cl0, cl11 = cl0, cl12 = cl0, cl13 = cl0, cl14 = cl0, cl15 = cl0;
  vec4 ch0 = cl0, ch1 = cl0, ch2 = cl0, ch3 = cl0, ch4 = cl0, ch5 = cl0, ch6 = cl0, ch7 = cl0, ch8 = cl0, ch9 = cl0,
       ch10 = cl0, ch11 = cl0, ch12 = cl0, ch13 = cl0, ch14 = cl0, ch15 = cl0;
  if (after_context) {
    if (lane < 16u && g_row0 + lane < g_it.row_count) context_stats = pa_context_stats(g_it, g_row0 + lane);
#define LOAD_CONTEXT(j) pa_context_out8(g_it, g_row0 + w_row, 16u * (g_slice0 + j) + w_dim, cl##j, ch##j);
    if (g_row0 + w_row < g_it.row_count) {
      EACH_SLICE(LOAD_CONTEXT)
    }
  }
#endif

  // Results: m and l of each row, then O one 16x16 slice at a time, through
  // the subgroup's 64 uvec4s of kv_stage (free after the key loop: the
  // barrier below; the host keeps 2 * BC * ROW >= PP_EPILOGUE_VEC4(NW)).
  if (staged_nonfinite) wg_flags[0] = 1u;
  pa_bad_block_note();   // (every lookup of the loop is done)
  barrier();
#if VKA_OP_BLOCK_SPARSE
  pa_report_bad_block(g_it);
#else
  pa_report_bad_block(g_it.seq);   // (the paged op's takes the sequence: its modules' code as it was)
#endif
  const bool fix = wg_flags[0] != 0u;
  const uint o_at = warp * 64u;
#if VKATTN_PATH != 2
  if (SHARED_SOFTMAX) {
    if (lane % 2u == 0u) {
      row_m[warp * 16u + my_row] = m;
      row_l[warp * 16u + my_row] = l;
    }
  } else
#endif
  if (lane % 4u == 0u) {
    row_m[warp * 16u + lane / 4u] = m_lo * VKA_LN2;   // (natural units again)
    row_m[warp * 16u + lane / 4u + 8u] = m_hi * VKA_LN2;
    row_l[warp * 16u + lane / 4u] = l_lo;
    row_l[warp * 16u + lane / 4u + 8u] = l_hi;
  }
  subgroup_sync();
  if (!has_rows) return;
#if !VKA_OP_BLOCK_SPARSE
  // Prefix prefill's new-token pass: each row's state merged with the
  // context pass's (its partial result), and the two weights its O and the
  // context's take kept beside the subgroup's O slice in kv_stage
  // (PP_EPILOGUE_VEC4) for O's elements below.
#define CONTEXT_WEIGHT(i, k) kv_stage[PP_EPILOGUE_O_VEC4(NW) + (i) / 2u][2u * ((i) % 2u) + (k)]
  if (after_context) {
    if (lane < 16u) {
      const uint i = warp * 16u + lane;
      float w = 1.0, w_context = 0.0;
      if (g_row0 + lane < g_it.row_count)
        vka_softmax_merge_weights(row_m[i], row_l[i], context_stats.x, context_stats.y, w, w_context);
      CONTEXT_WEIGHT(i, 0u) = floatBitsToUint(w);
      CONTEXT_WEIGHT(i, 1u) = floatBitsToUint(w_context);
    }
    subgroup_sync();
  }
// o (a row's 8 dims from d) merged with the context's: before the
// non-finite term, which the weights must not scale (an infinity times a
// weight that underflowed would be NaN).
#define MERGE_CONTEXT(o, j)                                                                        \
  if (after_context) {                                                                             \
    const float w = uintBitsToFloat(CONTEXT_WEIGHT(warp * 16u + w_row, 0u));                       \
    const float wc = uintBitsToFloat(CONTEXT_WEIGHT(warp * 16u + w_row, 1u));                      \
    [[unroll]] for (uint i = 0; i < 4u; ++i) {                                                     \
      o[i] = o[i] * w + cl##j[i] * wc;                                                             \
      o[i + 4u] = o[i + 4u] * w + ch##j[i] * wc;                                                   \
    }                                                                                              \
  }
#else
#define MERGE_CONTEXT(o, j)
#endif
  // Each row's output factor, once per row rather than per element (the
  // softmax's finish has an exp and a division), in row_scale (free after
  // the key loop).
  if (lane < 16u)
    ROW_SCALE(warp * 16u + lane) = pa_result_factor(g_it, g_row0 + lane, row_m[warp * 16u + lane], row_l[warp * 16u + lane]);
  subgroup_sync();
  const float v_scale = pa_value_scale(g_it);
// Each lane writes 8 dims of one row (w_row, w_dim above), in one store
// where the output allows (pa_write_result8_scaled).
#define WRITE_O(j)                                                                                 \
  coopMatStore(o##j, kv_stage, o_at, 4u, gl_CooperativeMatrixLayoutRowMajor);                      \
  subgroup_sync();                                                                                 \
  {                                                                                                \
    const uint d = 16u * (g_slice0 + j) + w_dim;                                                   \
    const vec4 lo = uintBitsToFloat(kv_stage[o_at + 4u * w_row + w_dim / 4u]) * v_scale;           \
    const vec4 hi = uintBitsToFloat(kv_stage[o_at + 4u * w_row + w_dim / 4u + 1u]) * v_scale;      \
    float o[8] = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);                         \
    MERGE_CONTEXT(o, j)                                                                            \
    if (fix) {                                                                                     \
      [[unroll]] for (uint i = 0; i < 8u; ++i) o[i] += pa_item_nonfinite_term(g_it, g_row0 + w_row, d + i); \
    }                                                                                              \
    pa_write_result8_scaled(g_it, g_row0 + w_row, d, o, row_m[warp * 16u + w_row], row_l[warp * 16u + w_row], \
                            ROW_SCALE(warp * 16u + w_row));                                        \
  }                                                                                                \
  subgroup_sync();
  EACH_SLICE(WRITE_O)
#if PP_PHASE_PROFILE
  prof_report(num_tiles);
#endif
}
