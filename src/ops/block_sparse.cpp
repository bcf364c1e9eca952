// block_sparse_attention: checks, the tile and pipeline choice, and the
// dispatch. Kernels: paged_prefill.comp (matrix paths) and paged_attention.comp
// (scalar) built with VKA_OP_BLOCK_SPARSE (shaders/include/block_sparse_io.glsl).
#include <vkattn/block_sparse.hpp>
#include <vkattn/block_sparse_variant.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <string>

#include "abi/block_sparse.h"
#include "abi/kv_chunk_division.h"
#include "../block_sparse_variants.hpp"
#include "../context_impl.hpp"
#include "../dispatch.hpp"
#include "../op_support.hpp"
#include "../schedule/paged_attention_schedule.hpp"

namespace vkattn {

using namespace detail;

namespace {

constexpr std::string_view kOp = "block_sparse_attention";
constexpr uint32_t kMaskBits = kMaskCausal | kMaskWindow | kMaskPrefix | kMaskDocument;
constexpr uint32_t kScoreBits = kScoreSoftcap | kScoreAlibi | kScoreRelBias | kScoreBias;

[[noreturn]] void fail(const std::string& what) { throw Error("block_sparse_attention: " + what); }

std::string num(int64_t v) { return std::to_string(v); }
// A float as written ("1e-30", not std::to_string's "0.000000").
std::string fnum(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

static_assert(BlockSparseCustomBuffers::kMax == abi::BS_MOD_BUFFERS, "the arguments hold as many buffers as the kernels bind");

// The registered variant named `name` (null for ""), or an error naming the registered ones.
const RegisteredVariant* custom_variant(const VariantName& name, const char* op) {
  if (name.empty()) return nullptr;
  if (const RegisteredVariant* v = find_variant(name)) return v;
  std::string known;
  for (const auto& n : block_sparse_variant_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(std::string(op) + ": custom_mods = '" + name.str() + "' is not a registered block-sparse variant (registered: " +
              (known.empty() ? "none" : known) + "; vkattn_add_block_sparse_variant compiles and registers one)");
}

// How a variant runs: the path, and the kernel's tile.
struct Launch {
  Path path = Path::scalar;
  uint32_t bm = 0, bn = 0, workgroup = 0;
  bool register_softmax = false;   // the prefill kernel's softmax in registers (PA_REGISTER_MATRICES)
};

// The prefill kernel where the device and the variant allow it (a matrix
// path with subgroups of 32, one head size for q.k and V, bf16 matrices for
// bf16), else the scalar kernel; paged attention's tile (detail::prefill_tile)
// where its rows and keys divide the mask's blocks, else the largest that does.
Launch choose_launch(const Context& ctx, const BlockSparseVariant& v, const RegisteredVariant* custom) {
  const auto& caps = ctx.capabilities();
  Launch l;
  // (Views: the conditional of a string and a literal would copy the string.)
  l.path = ctx.path_for(custom ? std::string_view(custom->attention) : std::string_view("block_sparse"));
  if (v.q_dtype == DType::bf16 && !caps.bf16_matrices) l.path = Path::scalar;
  const uint32_t dv = v.v_head_size ? v.v_head_size : v.head_size;
  // The prefill kernel takes one head size for q.k and V; the scalar kernel either.
  if (caps.subgroup_size != 32 || dv != v.head_size) l.path = Path::scalar;
  l.path = prefill_kernel_path(l.path, caps.coopmat_register_order);
  ScheduleDevice dev;
  dev.path = l.path;
  dev.subgroup_size = caps.subgroup_size;
  dev.max_shared_memory = caps.max_shared_memory;
  dev.prefill_shared_softmax = !caps.coopmat_register_order;
  l.register_softmax = !dev.prefill_shared_softmax;   // (the module's form is the tile's)
  if (l.path != Path::scalar) {
    const Tile t = block_sparse_prefill_tile(dev, v.head_size, v.q_block_size, v.kv_block_size);
    if (t.bm) {
      l.bm = t.bm;
      l.bn = t.bn;
      l.workgroup = t.workgroup;
      return l;
    }
    l.path = Path::scalar;   // no tile of the prefill kernel divides the blocks
  }
  dev.path = Path::scalar;
  const Tile t = choose_tile(dev, std::max(v.head_size, dv), 16);
  l.bm = t.bm;
  l.bn = t.bn;
  l.workgroup = t.workgroup;
  while (l.bn > 8 && v.kv_block_size % l.bn) l.bn /= 2;
  if (v.q_block_size % l.bm || v.kv_block_size % l.bn)
    fail("q_block_size = " + num(v.q_block_size) + " and kv_block_size = " + num(v.kv_block_size) +
         " cannot be tiled: expected multiples of " + num(l.bm) + " and " + num(t.bn) + " (32 and 32 run on every path)");
  return l;
}

// The variant's checks; `op` names the function that was called.
void check_variant(const BlockSparseVariant& v, std::string_view op = kOp) try {
  if (v.q_dtype != DType::f16 && v.q_dtype != DType::bf16)
    fail("q dtype " + dtype_text(v.q_dtype) + " is not supported: expected f16 or bf16");
  if (v.out_dtype != DType::f16 && v.out_dtype != DType::bf16 && v.out_dtype != DType::f32)
    fail("out dtype " + dtype_text(v.out_dtype) + " is not supported: expected f16, bf16 or f32");
  if (v.num_q_heads == 0 || v.num_kv_heads == 0 || v.num_q_heads % v.num_kv_heads)
    fail("num_q_heads = " + num(v.num_q_heads) + " is not a multiple of num_kv_heads = " + num(v.num_kv_heads) +
         " (GQA needs a whole number of q heads per kv head)");
  if (v.num_q_heads / v.num_kv_heads > 256)
    fail("num_q_heads / num_kv_heads = " + num(v.num_q_heads / v.num_kv_heads) + " is not supported: expected at most 256");
  if (v.head_size < 16 || v.head_size > 256 || v.head_size % 16)
    fail("head size " + num(v.head_size) + " is not supported: expected a multiple of 16 up to 256");
  if (v.v_head_size && (v.v_head_size < 16 || v.v_head_size > 256 || v.v_head_size % 16))
    fail("V's head size " + num(v.v_head_size) + " is not supported: expected a multiple of 16 up to 256");
  for (auto [name, size] : {std::pair{"q_block_size", v.q_block_size}, std::pair{"kv_block_size", v.kv_block_size}})
    if (size == 0 || size > 32768 || size % 16)
      fail(std::string("mask.") + name + " = " + num(size) + " is not supported: expected a multiple of 16 up to 32768");
  if ((v.mods.all | v.mods.any) & ~kMaskBits)
    fail("mods.all / mods.any = " + num(v.mods.all) + " / " + num(v.mods.any) + " has unknown bits: expected BlockSparseMask bits (<= 15)");
  if (v.mods.score & ~kScoreBits)
    fail("mods.score = " + num(v.mods.score) + " has unknown bits: expected BlockSparseScore bits (<= 15)");
  if (v.paged_kv_block_size) {
    if (v.paged_kv_block_size > kMaxKvBlockSize)
      fail("paged_kv_block_size = " + num(v.paged_kv_block_size) + " is no cache's: expected 1 to " + num(kMaxKvBlockSize));
    layout_name(v.paged_kv_layout);   // (throws for a value that is no layout)
    if (v.v_head_size && v.v_head_size != v.head_size)
      fail("paged_kv: V's head size is the cache's, the same as q.k's (v_head_size " + num(v.v_head_size) + ", head size " + num(v.head_size) + ")");
    if (v.paged_kv_dtype && *v.paged_kv_dtype != v.q_dtype && *v.paged_kv_dtype != DType::fp8_e4m3 && *v.paged_kv_dtype != DType::fp8_e5m2)
      fail("the paged cache holds " + dtype_text(*v.paged_kv_dtype) + ", q is " + dtype_text(v.q_dtype) +
           ": expected the cache in q's dtype, fp8_e4m3 or fp8_e5m2");
  } else if (v.paged_kv_dtype) {
    fail("paged_kv_dtype is set and paged_kv_block_size is 0: expected a paged cache's block size with its dtype");
  }
} catch (const Error& e) {
  if (op == kOp) throw;
  throw Error(std::string(op) + ": " + std::string(e.what()).substr(kOp.size() + 2));
}

// views_form: the prefill kernel's loads and stores of its views
// (abi::BS_VIEWS_*, views_form_of), one per pipeline; the scalar kernel
// takes BS_VIEWS_AT_RUN_TIME.
abi::BlockSparseSpec spec_of(const BlockSparseVariant& v, const Launch& l, uint32_t views_form) {
  abi::BlockSparseSpec s;
  s.PA_HEAD_SIZE = v.head_size;
  s.PA_NUM_KV_HEADS = v.num_kv_heads;
  s.PA_GQA = v.num_q_heads / v.num_kv_heads;
  s.PA_BM = l.bm;
  s.PA_BN = l.bn;
  s.PA_WORKGROUP_SIZE = l.workgroup;
  s.PA_CACHE_DTYPE = static_cast<uint32_t>(v.q_dtype);   // K/V are q's dtype
  s.PA_Q_DTYPE = static_cast<uint32_t>(v.q_dtype);
  s.PA_OUT_DTYPE = static_cast<uint32_t>(v.out_dtype);
  s.PA_WRITE_LSE = v.lse;
  s.PA_SUBGROUP_SIZE = 32;
  s.PA_KV_SUFFIX = 1;   // K/V rows in q's dtype, not the cache's (the suffix loads)
  s.PA_REGISTER_MATRICES = l.path != Path::scalar && l.register_softmax;
  s.BS_KV_BLOCK = v.kv_block_size;
  s.BS_MASK_ALL = v.mods.all;
  s.BS_MASK_ANY = v.mods.any;
  s.BS_SCORE_MODS = v.mods.score;
  s.BS_WRITE_ROW_MAX = v.row_max;
  s.BS_V_HEAD_SIZE = v.v_head_size && v.v_head_size != v.head_size ? v.v_head_size : 0;
  s.BS_VIEWS_FORM = views_form;
  if (v.paged_kv_block_size) {
    s.BS_PAGED_KV = 1;
    s.PA_BLOCK_SIZE = v.paged_kv_block_size;
    s.PA_LAYOUT = static_cast<uint32_t>(v.paged_kv_layout);
    if (v.paged_kv_dtype) s.PA_CACHE_DTYPE = static_cast<uint32_t>(*v.paged_kv_dtype);   // (fp8: block_sparse_io.glsl decodes it)
  }
  return s;
}

// The form one run takes: 16-byte loads and stores where every view's
// offset and strides allow them (wide: q, out, and k and v unless from the
// paged cache), with no test of the keys where no tile of keys (l.bn)
// straddles Lkv; else each chosen by the push constants' flags.
uint32_t views_form_of(const BlockSparseVariant& v, const Launch& l, bool wide, int64_t kv_len) {
  if (l.path == Path::scalar || !wide) return abi::BS_VIEWS_AT_RUN_TIME;
  if (v.paged_kv_block_size) return abi::BS_VIEWS_WIDE;
  return kv_len != 0 && kv_len % l.bn == 0 ? abi::BS_VIEWS_WIDE_WHOLE_TILES : abi::BS_VIEWS_WIDE;
}
// Every form a variant's runs may take (views_form_of over wide and narrow
// views, whole and ragged tiles), each once: the pipelines prepare makes.
std::vector<uint32_t> views_forms(const BlockSparseVariant& v, const Launch& l) {
  std::vector<uint32_t> forms;
  for (const bool wide : {true, false})
    for (const int64_t kv_len : {int64_t(l.bn), int64_t(l.bn) + 1}) {
      const uint32_t f = views_form_of(v, l, wide, kv_len);
      if (std::find(forms.begin(), forms.end(), f) == forms.end()) forms.push_back(f);
    }
  return forms;
}

const Pipeline& pipeline_of(ContextImpl& impl, Path path, const abi::BlockSparseSpec& spec, const RegisteredVariant* custom) {
  const bool bf16 = path != Path::scalar && spec.PA_Q_DTYPE == static_cast<uint32_t>(DType::bf16);
  // Document masks take the modules that stage the ids in shared memory
  // (shaders/CMakeLists.txt says why apart); the scalar kernel has one module.
  const bool documents = path != Path::scalar && ((spec.BS_MASK_ALL | spec.BS_MASK_ANY) & kMaskDocument) != 0;
  std::string_view kernel = documents ? (bf16 ? "block_sparse_documents_bf16" : "block_sparse_documents")
                                      : (bf16 ? "block_sparse_bf16" : "block_sparse");
  if (custom) kernel = bf16 ? custom->attention_bf16 : custom->attention;
  return impl.pipelines->get({kernel, path, spec_words(spec), abi::BS_BINDINGS, sizeof(abi::BlockSparsePush),
                              path == Path::scalar ? 0u : 32u});
}

// A view the kernels index as contiguous, of this dtype and shape (the block
// mask's lists and document ids: i32; LSE, row max and the mods' tables: f32).
void check_contiguous(const char* name, const TensorView& t, DType dtype, std::initializer_list<int64_t> shape,
                      std::initializer_list<const char*> dims) {
  check_view(kOp, name, t, {dtype}, shape, dims);
  check_strides(kOp, name, t);
  int64_t expect = 1;
  for (std::size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] > 1 && t.stride(d) != expect)
      fail(std::string(name) + " must be contiguous (stride " + num(t.stride(d)) + " of dimension " + num(int64_t(d)) +
           ", expected " + num(expect) + ")");
    expect *= t.shape[d];
  }
}
void check_mask_view(const char* name, const TensorView& t, std::initializer_list<int64_t> shape,
                     std::initializer_list<const char*> dims) {
  check_contiguous(name, t, DType::i32, shape, dims);
}
void check_contiguous_f32(const char* name, const TensorView& t, std::initializer_list<int64_t> shape,
                          std::initializer_list<const char*> dims) {
  check_contiguous(name, t, DType::f32, shape, dims);
}

// The block mask's views for queries of length Lq: shapes, dtypes, and that
// the lists can hold every kv block of Lkv keys (a builder's need; the
// attention reads only the counts' entries).
struct MaskShape {
  int64_t sz, sh, q_blocks, kv_blocks;
};
MaskShape check_mask(const BlockMask& m, int64_t Lq, int64_t Lkv, bool every_block = false) {
  if (m.kv_num_blocks.shape.size() != 3)
    fail("mask.kv_num_blocks has " + num(int64_t(m.kv_num_blocks.shape.size())) + " dimensions, expected 3: [Sz, Sh, q_blocks]");
  if (m.kv_indices.shape.size() != 4)
    fail("mask.kv_indices has " + num(int64_t(m.kv_indices.shape.size())) + " dimensions, expected 4: [Sz, Sh, q_blocks, kv_blocks]");
  const int64_t Sz = m.kv_num_blocks.shape[0], Sh = m.kv_num_blocks.shape[1];
  const int64_t QB = (Lq + m.q_block_size - 1) / m.q_block_size, KB = m.kv_indices.shape[3];
  if (Sz < 1 || Sz > 65535 || Sh < 1 || Sh > 65535)
    fail("the mask's batch and head extents are " + num(Sz) + " and " + num(Sh) + ": expected 1 to 65535 each");
  if (KB < 1) fail("mask.kv_indices has 0 columns, expected kv_blocks >= 1");
  check_mask_view("mask.kv_num_blocks", m.kv_num_blocks, {Sz, Sh, QB}, {"Sz", "Sh", "ceil(Lq / q_block_size)"});
  check_mask_view("mask.kv_indices", m.kv_indices, {Sz, Sh, QB, KB}, {"Sz", "Sh", "ceil(Lq / q_block_size)", "kv_blocks"});
  if (m.full_kv_num_blocks.has_value() != m.full_kv_indices.has_value())
    fail("mask.full_kv_num_blocks and mask.full_kv_indices come together: expected both or neither");
  if (m.full_kv_num_blocks) {
    check_mask_view("mask.full_kv_num_blocks", *m.full_kv_num_blocks, {Sz, Sh, QB}, {"Sz", "Sh", "ceil(Lq / q_block_size)"});
    check_mask_view("mask.full_kv_indices", *m.full_kv_indices, {Sz, Sh, QB, KB}, {"Sz", "Sh", "ceil(Lq / q_block_size)", "kv_blocks"});
  }
  if (uint64_t(Sz) * uint64_t(Sh) * uint64_t(QB) * uint64_t(KB) >= (1ull << 32)) fail("the mask's index lists must hold fewer than 2^32 entries");
  const int64_t blocks = (Lkv + m.kv_block_size - 1) / m.kv_block_size;
  if (every_block && KB < blocks)
    fail("mask.kv_indices holds " + num(KB) + " blocks per row, fewer than the " + num(blocks) +
         " kv blocks of Lkv = " + num(Lkv) + ": expected kv_blocks >= ceil(Lkv / kv_block_size)");
  return {Sz, Sh, QB, KB};
}


// The mods' values for a run of these lengths (those of mods that are off
// must be absent); returns q_offset.
int32_t check_values(const BlockSparseMods& mods, const BlockSparseModValues& mv, std::optional<int32_t> q_offset_opt,
                     int64_t Hq, int64_t Lq, int64_t Lkv) {
  const uint32_t masks = mods.all | mods.any;
  const int64_t q_offset = q_offset_opt ? *q_offset_opt : Lkv - Lq;
  if ((masks & kMaskWindow) && mv.window < 1) fail("values.window = " + num(mv.window) + ", expected >= 1 with kMaskWindow");
  if ((masks & kMaskPrefix) && mv.prefix_len < 0) fail("values.prefix_len = " + num(mv.prefix_len) + ", expected >= 0 with kMaskPrefix");
  if (mods.score & kScoreSoftcap && !(mv.softcap > 0 && std::isfinite(mv.softcap)))
    fail("values.softcap = " + fnum(mv.softcap) + ", expected a finite value > 0 with kScoreSoftcap");
  // A value for a mod that is off would be ignored: a caller who forgot the
  // mod's bit would get attention without it.
  if (!(masks & kMaskWindow) && mv.window != 0)
    fail("values.window = " + num(mv.window) + " is given but kMaskWindow is off: expected 0");
  if (!(masks & kMaskPrefix) && mv.prefix_len != 0)
    fail("values.prefix_len = " + num(mv.prefix_len) + " is given but kMaskPrefix is off: expected 0");
  if (!(mods.score & kScoreSoftcap) && mv.softcap != 0)
    fail("values.softcap = " + fnum(mv.softcap) + " is given but kScoreSoftcap is off: expected 0");
  auto need = [&](const std::optional<TensorView>& t, bool on, const char* name, const char* mod) {
    if (on && !t) fail(std::string("values.") + name + " is missing: " + mod + " needs it");
    if (!on && t) fail(std::string("values.") + name + " is given but " + mod + " is off: expected it absent");
  };
  need(mv.alibi_slopes, mods.score & kScoreAlibi, "alibi_slopes", "kScoreAlibi");
  need(mv.document_ids, masks & kMaskDocument, "document_ids", "kMaskDocument");
  need(mv.rel_bias, mods.score & kScoreRelBias, "rel_bias", "kScoreRelBias");
  need(mv.bias, mods.score & kScoreBias, "bias", "kScoreBias");
  if (mv.alibi_slopes) check_contiguous_f32("values.alibi_slopes", *mv.alibi_slopes, {Hq}, {"Hq"});
  if (mv.document_ids) {
    check_mask_view("values.document_ids", *mv.document_ids, {Lkv}, {"Lkv"});
    if (q_offset < 0 || q_offset + Lq > Lkv)
      fail("kMaskDocument reads document_ids at q_idx + q_offset: expected 0 <= q_offset and q_offset + Lq <= Lkv (q_offset " +
           num(q_offset) + ", Lq " + num(Lq) + ", Lkv " + num(Lkv) + ")");
  }
  if (mv.rel_bias) check_contiguous_f32("values.rel_bias", *mv.rel_bias, {Hq, Lq + Lkv - 1}, {"Hq", "Lq + Lkv - 1"});
  if (mv.bias) {
    check_contiguous_f32("values.bias", *mv.bias, {Hq, Lq, Lkv}, {"Hq", "Lq", "Lkv"});
    if (uint64_t(Hq) * uint64_t(Lq) * uint64_t(Lkv) >= (1ull << 32)) fail("values.bias must hold fewer than 2^32 elements");
  }
  // The kernels take q_pos = q_idx + q_offset, q_pos - kv_idx and its
  // negation (ALiBi) in 32 bits.
  const int64_t q_last = q_offset + std::max<int64_t>(Lq - 1, 0), k_last = std::max<int64_t>(Lkv - 1, 0);
  if (q_offset - k_last <= INT32_MIN || q_last > INT32_MAX)
    fail("q_offset = " + num(q_offset) + " puts query positions (q_idx + q_offset, up to " + num(q_last) +
         ") or their distances to keys (down to " + num(q_offset - k_last) + ") outside 32 bits: expected " +
         num(int64_t(INT32_MIN) + 1 + k_last) + " <= q_offset <= " + num(int64_t(INT32_MAX) - std::max<int64_t>(Lq - 1, 0)));
  return static_cast<int32_t>(q_offset);
}
// The views of a run bound to their bindings (view v is binding v + 1), and
// each view's element offset inside its own.
struct Bindings {
  Bindings(ContextImpl& impl_, std::string_view op_) : impl(impl_), op(op_) {}
  void bind(uint32_t binding, const TensorView* v, const char* name) {
    BufferBinding& to = buffers[binding - 1];
    if (!v) {
      to = placeholder_binding(impl);
      return;
    }
    const BoundView bv = bind_view(impl, *v, op, name);
    to = bv.binding;
    const uint32_t view = binding - 1;
    offsets[view / 4] |= bv.element_offset << (8 * (view % 4));
  }
  uint32_t offset_of(uint32_t binding) const { return (offsets[(binding - 1) / 4] >> (8 * ((binding - 1) % 4))) & 0xFF; }
  // A variant's buffers, by name, at BS_BINDING_MOD0 + slot (placeholders for
  // the slots it does not have): each of its declared dtype, contiguous, with
  // at least its declared extent's elements at these sizes (the mods index it
  // from its first element), starting on a binding (no view offset). Then
  // they are inputs that no output may overlap.
  void bind_custom(const RegisteredVariant* custom, const BlockSparseCustomBuffers& given, const ExtentSizes& sizes) {
    for (uint32_t slot = 0; slot < abi::BS_MOD_BUFFERS; ++slot) buffers[abi::BS_BINDING_MOD0 + slot - 1] = placeholder_binding(impl);
    const std::size_t declared = custom ? custom->buffers.size() : 0;
    for (std::size_t i = 0; i < given.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (given[i].name == given[j].name)
          throw Error(std::string(op) + ": custom_buffers names '" + given[i].name.str() + "' twice: expected each buffer once");
    for (const auto& [name, view] : given) {
      std::size_t slot = 0;
      while (slot < declared && custom->buffers[slot].name != name) ++slot;
      if (slot == declared) {
        std::string names;
        for (std::size_t i = 0; i < declared; ++i) names += (i ? ", " : "") + custom->buffers[i].name;
        throw Error(std::string(op) + ": custom_buffers names '" + name.str() + "', which " +
                    (custom ? "variant '" + custom->name + "' does not declare (its buffers: " + (names.empty() ? "none" : names) + ")"
                            : std::string("only a variant (custom_mods) has")));
      }
      const RegisteredBuffer& declared_as = custom->buffers[slot];
      // (Messages are built only on failure: this runs every step.)
      auto buffer = [&name] { return "custom buffer '" + name.str() + "'"; };
      if (view.dtype != declared_as.dtype)
        throw Error(std::string(op) + ": " + buffer() + " is " + std::string(dtype_name(view.dtype)) + ", expected " +
                    std::string(dtype_name(declared_as.dtype)) + " as variant '" + custom->name + "' declares it");
      for (std::size_t d = view.shape.size(), inner = 1; d-- > 0; inner *= static_cast<std::size_t>(view.shape[d]))
        if (view.shape[d] > 1 && view.stride(d) != static_cast<int64_t>(inner))
          throw Error(std::string(op) + ": " + buffer() + " " + view.shape_string() +
                      " is not contiguous (dimension " + std::to_string(d) + " has stride " + std::to_string(view.stride(d)) +
                      ", expected " + std::to_string(inner) + "): the variant's mods index it from its first element");
      const int64_t needed = declared_as.elements(sizes);
      if (view.numel() < needed)
        throw Error(std::string(op) + ": " + buffer() + " holds " + std::to_string(view.numel()) + " elements; variant '" +
                    custom->name + "' reads up to " + declared_as.extent + " = " + std::to_string(needed) +
                    " of them (B " + std::to_string(sizes.batch) + ", H " + std::to_string(sizes.heads) + ", Lq " +
                    std::to_string(sizes.q_len) + ", Lkv " + std::to_string(sizes.kv_len) + ")");
      const BoundView bv = bind_view(impl, view, op, name);   // no string built per run
      if (bv.element_offset)
        throw Error(std::string(op) + ": custom buffer '" + name.str() + "' starts " + std::to_string(bv.element_offset * dtype_size(view.dtype)) +
                    " bytes past a multiple of the device's storage-buffer offset alignment (" +
                    std::to_string(impl.caps.min_storage_buffer_offset_alignment) + "): expected it to start on one");
      buffers[abi::BS_BINDING_MOD0 + slot - 1] = bv.binding;
    }
    for (std::size_t slot = 0; slot < declared; ++slot) {
      bool found = false;
      for (const auto& g : given) found = found || g.name == custom->buffers[slot].name;
      if (!found)
        throw Error(std::string(op) + ": variant '" + custom->name + "' reads buffer '" + custom->buffers[slot].name +
                    "': expected it in custom_buffers");
    }
  }
  // Throws when an output overlaps one of the variant's buffers (after
  // bind_custom: at most BS_MOD_BUFFERS of them, each named once).
  void check_custom_apart(std::span<const NamedView> outputs, const BlockSparseCustomBuffers& given) const {
    std::array<NamedView, abi::BS_MOD_BUFFERS> views{};
    const std::size_t n = std::min<std::size_t>(given.size(), views.size());
    for (std::size_t i = 0; i < n; ++i) views[i] = {&given[i].view, given[i].name.c_str()};
    check_apart(op, outputs, std::span<const NamedView>(views.data(), n));
  }
  ContextImpl& impl;
  std::string_view op;
  BufferBinding buffers[abi::BS_BINDINGS - 1];
  uint32_t offsets[4] = {0, 0, 0, 0};
};

// What the attention and the mask builder share of the push constants: the
// lengths, the mask's geometry, the mask mods' values, the view offsets.
void set_mask_push(abi::BlockSparsePush& push, const MaskShape& ms, const BlockMask& m, int64_t Lq, int64_t Lkv,
                   const BlockSparseModValues& mv, int32_t q_offset, const Bindings& b) {
  push.q_len = static_cast<uint32_t>(Lq);
  push.kv_len = static_cast<uint32_t>(Lkv);
  push.mask_extents = static_cast<uint32_t>(ms.sz) | static_cast<uint32_t>(ms.sh) << 16;
  push.q_blocks = static_cast<uint32_t>(ms.q_blocks);
  push.kv_blocks = static_cast<uint32_t>(ms.kv_blocks);
  push.block_sizes = m.q_block_size | m.kv_block_size << 16;
  push.window = mv.window;
  push.prefix_len = mv.prefix_len;
  push.q_offset = q_offset;
  push.view_offsets0 = b.offsets[0];
  push.view_offsets1 = b.offsets[1];
  push.view_offsets2 = b.offsets[2];
  push.view_offsets3 = b.offsets[3];
}

// The paged cache of args.paged_kv: this Context's and live, and k and v
// left empty (K/V come from it).
const KvCacheConfig& paged_cache(const ContextImpl& impl, const BlockSparsePagedKv& p, const BlockSparseArgs& a) {
  if (!p.cache) fail("paged_kv.cache is null: expected the cache to read K and V from");
  if (p.cache->context_id() != impl.id)
    fail(p.cache->context_id() ? "paged_kv.cache belongs to another Context" : "paged_kv.cache was moved from: use the cache it was moved to");
  if (!a.k.shape.empty() || !a.v.shape.empty())
    fail("k " + a.k.shape_string() + " and v " + a.v.shape_string() + " are given with paged_kv: expected them empty (K and V come from the cache)");
  return p.cache->config();
}

}  // namespace

Path block_sparse_attention_path(const Context& ctx, const BlockSparseVariant& v) {
  check_variant(v, "block_sparse_attention_path");
  return choose_launch(ctx, v, custom_variant(v.custom_mods, "block_sparse_attention_path")).path;
}

void prepare_block_sparse_attention(Context& ctx, std::span<const BlockSparseVariant> variants) {
  auto& impl = ctx.impl();
  impl.check_usable(kOp);
  for (const auto& v : variants) {
    check_variant(v, "prepare_block_sparse_attention");
    const RegisteredVariant* custom = custom_variant(v.custom_mods, "prepare_block_sparse_attention");
    const Launch l = choose_launch(ctx, v, custom);
    for (const uint32_t form : views_forms(v, l)) pipeline_of(impl, l.path, spec_of(v, l, form), custom);
  }
}

void block_sparse_attention(Context& ctx, const BlockSparseArgs& a, VkCommandBuffer cmd) {
  auto& impl = ctx.impl();
  impl.check_usable(kOp);
  // Shapes.
  if (a.q.shape.size() != 4) fail("q has " + num(int64_t(a.q.shape.size())) + " dimensions, expected 4: [B, Hq, Lq, head_size]");
  const BlockSparsePagedKv* paged = a.paged_kv ? &*a.paged_kv : nullptr;
  const KvCacheConfig* cache = paged ? &paged_cache(impl, *paged, a) : nullptr;
  if (!paged && a.k.shape.size() != 4)
    fail("k has " + num(int64_t(a.k.shape.size())) + " dimensions, expected 4: [Bkv, Hkv, Lkv, head_size]");
  const int64_t B = a.q.shape[0], Hq = a.q.shape[1], Lq = a.q.shape[2], D = a.q.shape[3];
  const int64_t Bkv = paged ? B : a.k.shape[0], Hkv = paged ? cache->num_kv_heads : a.k.shape[1];
  const int64_t Lkv = paged ? paged->kv_len : a.k.shape[2];
  if (B < 1 || Hq < 1) fail("q " + a.q.shape_string() + " has no batch or heads: expected B >= 1 and Hq >= 1");
  if (Bkv != B && Bkv != 1) fail("k's batch is " + num(Bkv) + ", expected q's (" + num(B) + ") or 1 (broadcast)");
  // Where K/V's heads come from, for messages (built only when one fails): k's shape, or the cache's configuration.
  auto kv_heads = [&] { return paged ? "the paged cache " + num(Hkv) + " (num_kv_heads)" : "k " + num(Hkv); };
  if (Hkv < 1 || Hq % Hkv) fail("q has " + num(Hq) + " heads and " + kv_heads() + ": expected a multiple (GQA)");
  if (Lq > INT32_MAX - 65536 || Lkv < 0 || Lkv > INT32_MAX - 65536)
    fail("Lq = " + num(Lq) + " and Lkv = " + num(Lkv) + ": expected 0 to 2^31 - 2^16 - 1 each" + (paged ? " (Lkv: paged_kv.kv_len)" : ""));
  if (!paged && a.v.shape.size() != 4)
    fail("v has " + num(int64_t(a.v.shape.size())) + " dimensions, expected 4: [Bkv, Hkv, Lkv, v_head_size]");
  const int64_t Dv = paged ? cache->head_size : a.v.shape[3];
  if (paged && D != Dv)
    fail("q's head size is " + num(D) + " and the paged cache's " + num(Dv) + ": expected the same (q " + a.q.shape_string() + ")");
  // From the shapes as given, before they narrow into the variant.
  if (Hq > 65535 || Hkv > 65535) fail("q has " + num(Hq) + " heads and " + kv_heads() + ": expected at most 65535 each");
  for (auto [what, size] : {std::pair{"head size", D}, std::pair{"V's head size", Dv}})
    if (size < 16 || size > 256 || size % 16)
      fail(std::string(what) + " " + num(size) + " (q " + a.q.shape_string() +
           (paged ? ", the paged cache's head size " + num(Dv) : ", v " + a.v.shape_string()) +
           ") is not supported: expected a multiple of 16 up to 256");
  BlockSparseVariant var;
  var.q_dtype = a.q.dtype;
  var.out_dtype = a.out.dtype;
  var.num_q_heads = static_cast<uint32_t>(Hq);
  var.num_kv_heads = static_cast<uint32_t>(Hkv);
  var.head_size = static_cast<uint32_t>(D);
  var.v_head_size = Dv == D ? 0 : static_cast<uint32_t>(Dv);
  var.q_block_size = a.mask.q_block_size;
  var.kv_block_size = a.mask.kv_block_size;
  var.mods = a.mods;
  var.lse = a.lse.has_value();
  var.row_max = a.row_max.has_value();
  if (cache) {
    var.paged_kv_block_size = cache->block_size;
    var.paged_kv_layout = cache->layout;
    if (cache->dtype != a.q.dtype) var.paged_kv_dtype = cache->dtype;   // (check_variant refuses all but fp8)
  }
  check_variant(var);
  const RegisteredVariant* custom = custom_variant(a.custom_mods, "block_sparse_attention");
  check_view(kOp, "q", a.q, {DType::f16, DType::bf16}, {B, Hq, Lq, D}, {"B", "Hq", "Lq", "head_size"});
  if (paged) {
    const TensorView& bt = paged->block_table;
    const int64_t columns = bt.shape.size() == 2 ? bt.shape[1] : -1, needed = (Lkv + cache->block_size - 1) / cache->block_size;
    check_view(kOp, "paged_kv.block_table", bt, {DType::i32}, {B, columns}, {"B", "columns"});
    check_strides(kOp, "paged_kv.block_table", bt);
    if (columns < needed)
      fail("paged_kv.block_table has " + num(columns) + " columns, fewer than the " + num(needed) + " blocks of kv_len = " +
           num(Lkv) + " at block size " + num(cache->block_size) + ": expected columns >= ceil(kv_len / block_size)");
  } else {
    check_view(kOp, "k", a.k, {a.q.dtype}, {Bkv, Hkv, Lkv, D}, {"Bkv", "Hkv", "Lkv", "head_size"});
    check_view(kOp, "v", a.v, {a.q.dtype}, {Bkv, Hkv, Lkv, Dv}, {"Bkv", "Hkv", "Lkv", "v_head_size"});
  }
  check_view(kOp, "out", a.out, {DType::f16, DType::bf16, DType::f32}, {B, Hq, Lq, Dv}, {"B", "Hq", "Lq", "v_head_size"});
  for (auto [name, t] : {std::pair{"q", &a.q}, std::pair{"k", &a.k}, std::pair{"v", &a.v}, std::pair{"out", &a.out}})
    if (!paged || (t != &a.k && t != &a.v)) check_strides(kOp, name, *t);
  check_distinct_elements(kOp, "out", a.out);
  if (a.lse) check_contiguous_f32("lse", *a.lse, {B, Hq, Lq}, {"B", "Hq", "Lq"});
  if (a.row_max) check_contiguous_f32("row_max", *a.row_max, {B, Hq, Lq}, {"B", "Hq", "Lq"});
  if (uint64_t(B) * uint64_t(Hq) * uint64_t(Lq) >= (1ull << 32)) fail("B * Hq * Lq must be below 2^32");

  const MaskShape ms = check_mask(a.mask, Lq, Lkv);
  const BlockMask& m = a.mask;
  const BlockSparseModValues& mv = a.values;
  const int32_t q_offset = check_values(a.mods, mv, a.q_offset, Hq, Lq, Lkv);
  const float scale = a.scale == 0 ? static_cast<float>(1.0 / std::sqrt(double(D))) : a.scale;
  if (!std::isfinite(scale)) fail("scale = " + std::to_string(a.scale) + ", expected a finite value (0: 1 / sqrt(head_size))");

  const NamedView outputs[] = {{&a.out, "out"}, {a.lse ? &*a.lse : nullptr, "lse"}, {a.row_max ? &*a.row_max : nullptr, "row_max"}};
  const TensorView* k_in = paged ? &paged->block_table : &a.k;
  const NamedView inputs[] = {{&a.q, "q"}, {k_in, paged ? "paged_kv.block_table" : "k"}, {paged ? nullptr : &a.v, "v"},
                              {&m.kv_num_blocks, "mask.kv_num_blocks"},
                              {&m.kv_indices, "mask.kv_indices"},
                              {m.full_kv_num_blocks ? &*m.full_kv_num_blocks : nullptr, "mask.full_kv_num_blocks"},
                              {m.full_kv_indices ? &*m.full_kv_indices : nullptr, "mask.full_kv_indices"},
                              {mv.alibi_slopes ? &*mv.alibi_slopes : nullptr, "values.alibi_slopes"},
                              {mv.document_ids ? &*mv.document_ids : nullptr, "values.document_ids"},
                              {mv.rel_bias ? &*mv.rel_bias : nullptr, "values.rel_bias"},
                              {mv.bias ? &*mv.bias : nullptr, "values.bias"}};
  check_apart(kOp, outputs, inputs);
  if (paged) check_apart_from_cache(kOp, outputs, *paged->cache, "an output must not share memory with the cache it reads");
  if (!cmd) fail("the command buffer is VK_NULL_HANDLE");

  Bindings bindings(impl, kOp);
  auto bind = [&](uint32_t binding, const TensorView* v, const char* name) { bindings.bind(binding, v, name); };
  auto opt = [](const std::optional<TensorView>& t) { return t ? &*t : nullptr; };
  bind(abi::BS_BINDING_Q, &a.q, "q");
  bind(abi::BS_BINDING_OUT, &a.out, "out");
  bind(abi::BS_BINDING_LSE, opt(a.lse), "lse");
  bind(abi::BS_BINDING_ROW_MAX, opt(a.row_max), "row_max");
  bind(abi::BS_BINDING_K, k_in, paged ? "paged_kv.block_table" : "k");
  bind(abi::BS_BINDING_V, paged ? nullptr : &a.v, "v");
  bind(abi::BS_BINDING_KV_NUM_BLOCKS, &m.kv_num_blocks, "mask.kv_num_blocks");
  bind(abi::BS_BINDING_KV_INDICES, &m.kv_indices, "mask.kv_indices");
  bind(abi::BS_BINDING_FULL_NUM_BLOCKS, opt(m.full_kv_num_blocks), "mask.full_kv_num_blocks");
  bind(abi::BS_BINDING_FULL_INDICES, opt(m.full_kv_indices), "mask.full_kv_indices");
  bind(abi::BS_BINDING_ALIBI, opt(mv.alibi_slopes), "values.alibi_slopes");
  bind(abi::BS_BINDING_DOCUMENT, opt(mv.document_ids), "values.document_ids");
  bind(abi::BS_BINDING_REL_BIAS, opt(mv.rel_bias), "values.rel_bias");
  bind(abi::BS_BINDING_BIAS, opt(mv.bias), "values.bias");
  bindings.bind_custom(custom, a.custom_buffers, {B, Hq, Lq, Lkv});
  bindings.check_custom_apart(outputs, a.custom_buffers);

  const Launch l = choose_launch(ctx, var, custom);
  const uint64_t items = uint64_t((Lq + l.bm - 1) / l.bm) * uint64_t(B) * uint64_t(Hq);
  if (items == 0) return;
  if (items >= (1ull << 32)) fail("ceil(Lq / " + num(l.bm) + ") * B * Hq work items must be below 2^32");
  // Whether a bound view's rows of 8 elements lie on 16-byte words.
  auto wide_rows = [&](uint32_t binding, const TensorView& t) {
    return rows_of_8_on_words(bindings.offset_of(binding), {t.stride(0), t.stride(1), t.stride(2)});
  };
  const bool kv_wide = paged || (wide_rows(abi::BS_BINDING_K, a.k) && wide_rows(abi::BS_BINDING_V, a.v));
  const bool q_wide = wide_rows(abi::BS_BINDING_Q, a.q), out_wide = wide_rows(abi::BS_BINDING_OUT, a.out);
  const Pipeline& pipe = pipeline_of(impl, l.path, spec_of(var, l, views_form_of(var, l, kv_wide && q_wide && out_wide, Lkv)), custom);

  abi::BlockSparsePush push{};
  const Grid grid = fold_grid(impl, items, kOp);
  push.num_workgroups = static_cast<uint32_t>(items);
  push.grid_x = grid.x;
  push.flags = m.full_kv_num_blocks ? abi::BS_FLAG_FULL_BLOCKS : 0;
  if (!kv_wide) push.flags |= abi::BS_FLAG_NARROW_KV;
  if (q_wide) push.flags |= abi::BS_FLAG_Q_WIDE;
  if (out_wide) push.flags |= abi::BS_FLAG_OUT_WIDE;
  push.batch = static_cast<uint32_t>(B);
  set_mask_push(push, ms, m, Lq, Lkv, mv, q_offset, bindings);
  push.q_batch_stride = static_cast<uint32_t>(a.q.stride(0));
  push.q_head_stride = static_cast<uint32_t>(a.q.stride(1));
  push.q_token_stride = static_cast<uint32_t>(a.q.stride(2));
  if (paged) {
    const uint64_t table = paged->cache->chunk_table_address();
    push.BS_PUSH_CHUNK_TABLE_LO = static_cast<uint32_t>(table);
    push.BS_PUSH_CHUNK_TABLE_HI = static_cast<uint32_t>(table >> 32);
    push.BS_PUSH_NUM_K_CHUNKS = paged->cache->num_chunks();
    push.BS_PUSH_BLOCKS_PER_CHUNK = paged->cache->blocks_per_chunk();
    push.chunk_magic = abi::vka_kv_chunk_magic(paged->cache->blocks_per_chunk());
    push.BS_PUSH_NUM_BLOCKS = cache->num_blocks;
    push.BS_PUSH_BLOCK_TABLE_STRIDE = static_cast<uint32_t>(paged->block_table.stride(0));
  } else {
    push.k_batch_stride = Bkv == 1 ? 0 : static_cast<uint32_t>(a.k.stride(0));
    push.k_head_stride = static_cast<uint32_t>(a.k.stride(1));
    push.k_token_stride = static_cast<uint32_t>(a.k.stride(2));
    push.v_batch_stride = Bkv == 1 ? 0 : static_cast<uint32_t>(a.v.stride(0));
    push.v_head_stride = static_cast<uint32_t>(a.v.stride(1));
    push.v_token_stride = static_cast<uint32_t>(a.v.stride(2));
  }
  push.out_batch_stride = static_cast<uint32_t>(a.out.stride(0));
  push.out_head_stride = static_cast<uint32_t>(a.out.stride(1));
  push.out_token_stride = static_cast<uint32_t>(a.out.stride(2));
  push.scale = scale;
  push.softcap = mv.softcap;
  record_dispatch(impl, cmd, pipe, bindings.buffers, &push, grid, ReportingOp::block_sparse_attention);
}

void block_sparse_attention(Context& ctx, const BlockSparseArgs& args) {
  ctx.submit_and_wait([&](VkCommandBuffer cmd) { block_sparse_attention(ctx, args, cmd); });
}

namespace {

constexpr std::string_view kBuildOp = "build_block_mask";

[[noreturn]] void build_fail(const std::string& what) { throw Error("build_block_mask: " + what); }

const Pipeline& build_pipeline(ContextImpl& impl, const BlockSparseMods& mods, const RegisteredVariant* custom) {
  abi::BlockSparseSpec spec;
  spec.PA_WORKGROUP_SIZE = std::min<uint32_t>(256, impl.caps.max_workgroup_invocations);
  spec.BS_MASK_ALL = mods.all;
  spec.BS_MASK_ANY = mods.any;
  return impl.pipelines->get({custom ? std::string_view(custom->build) : "block_mask_build", Path::scalar, spec_words(spec), abi::BS_BINDINGS, sizeof(abi::BlockSparsePush), 0});
}

}  // namespace

void prepare_build_block_mask(Context& ctx, std::span<const BlockSparseMods> mods, const VariantName& custom_mods) {
  auto& impl = ctx.impl();
  impl.check_usable(kBuildOp);
  const RegisteredVariant* custom = custom_variant(custom_mods, "prepare_build_block_mask");
  for (BlockSparseMods m : mods) {
    m.score = 0;
    BlockSparseVariant var;   // for its check of the mask bits
    var.num_q_heads = var.num_kv_heads = 1;
    var.head_size = 16;
    var.mods = m;
    check_variant(var, "prepare_build_block_mask");
    build_pipeline(impl, m, custom);
  }
}

void build_block_mask(Context& ctx, const BlockMaskBuild& b, VkCommandBuffer cmd) {
  auto& impl = ctx.impl();
  impl.check_usable(kBuildOp);
  const int64_t Lq = b.q_len, Lkv = b.kv_len;
  if (Lq < 0 || Lkv < 0 || Lq > INT32_MAX - 65536 || Lkv > INT32_MAX - 65536)
    build_fail("q_len = " + num(Lq) + " and kv_len = " + num(Lkv) + ": expected 0 to 2^31 - 2^16 each");
  const RegisteredVariant* custom = custom_variant(b.custom_mods, "build_block_mask");
  if (b.mods.score) build_fail("mods.score = " + num(b.mods.score) + ": score mods do not shape a block mask (expected 0)");
  BlockSparseVariant var;   // for its checks of the block sizes and mask bits
  var.num_q_heads = var.num_kv_heads = 1;
  var.head_size = 16;
  var.q_block_size = b.mask.q_block_size;
  var.kv_block_size = b.mask.kv_block_size;
  var.mods = b.mods;
  check_variant(var, kBuildOp);
  MaskShape ms;
  int32_t q_offset = 0;
  try {
    ms = check_mask(b.mask, Lq, Lkv, /*every_block=*/true);
    q_offset = check_values(b.mods, b.values, b.q_offset, 1, Lq, Lkv);
  } catch (const Error& e) {
    build_fail(std::string(e.what()).substr(kOp.size() + 2));
  }
  const BlockMask& m = b.mask;
  const BlockSparseModValues& mv = b.values;
  const NamedView outputs[] = {{&m.kv_num_blocks, "mask.kv_num_blocks"}, {&m.kv_indices, "mask.kv_indices"},
                               {m.full_kv_num_blocks ? &*m.full_kv_num_blocks : nullptr, "mask.full_kv_num_blocks"},
                               {m.full_kv_indices ? &*m.full_kv_indices : nullptr, "mask.full_kv_indices"}};
  const NamedView inputs[] = {{mv.document_ids ? &*mv.document_ids : nullptr, "values.document_ids"}};
  check_apart(kBuildOp, outputs, inputs);
  for (const auto& o : outputs)
    if (o.view) check_distinct_elements(kBuildOp, o.name, *o.view);
  if (!cmd) build_fail("the command buffer is VK_NULL_HANDLE");

  Bindings bindings(impl, kBuildOp);
  auto opt = [](const std::optional<TensorView>& t) { return t ? &*t : nullptr; };
  for (uint32_t binding = 1; binding < abi::BS_BINDINGS; ++binding) bindings.bind(binding, nullptr, "");
  bindings.bind(abi::BS_BINDING_KV_NUM_BLOCKS, &m.kv_num_blocks, "mask.kv_num_blocks");
  bindings.bind(abi::BS_BINDING_KV_INDICES, &m.kv_indices, "mask.kv_indices");
  bindings.bind(abi::BS_BINDING_FULL_NUM_BLOCKS, opt(m.full_kv_num_blocks), "mask.full_kv_num_blocks");
  bindings.bind(abi::BS_BINDING_FULL_INDICES, opt(m.full_kv_indices), "mask.full_kv_indices");
  bindings.bind(abi::BS_BINDING_DOCUMENT, opt(mv.document_ids), "values.document_ids");
  bindings.bind_custom(custom, b.custom_buffers, {ms.sz, ms.sh, b.q_len, b.kv_len});
  bindings.check_custom_apart(outputs, b.custom_buffers);
  const uint64_t rows = uint64_t(ms.sz) * uint64_t(ms.sh) * uint64_t(ms.q_blocks);
  if (rows == 0) return;
  BlockSparseMods mods = b.mods;
  const Pipeline& pipe = build_pipeline(impl, mods, custom);
  abi::BlockSparsePush push{};
  const Grid grid = fold_grid(impl, rows, kBuildOp);
  push.num_workgroups = static_cast<uint32_t>(rows);
  push.grid_x = grid.x;
  push.flags = m.full_kv_num_blocks ? abi::BS_FLAG_FULL_BLOCKS : 0;
  set_mask_push(push, ms, m, Lq, Lkv, mv, q_offset, bindings);
  record_dispatch(impl, cmd, pipe, bindings.buffers, &push, grid, ReportingOp::build_block_mask);
}

void build_block_mask(Context& ctx, const BlockMaskBuild& build) {
  ctx.submit_and_wait([&](VkCommandBuffer cmd) { build_block_mask(ctx, build, cmd); });
}

}  // namespace vkattn
