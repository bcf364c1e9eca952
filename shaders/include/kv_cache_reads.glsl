// Reading the paged KV cache: its chunk bases (the first ones held in shared
// memory), a block's address, the zeros region, and a key's eight head dims
// in every layout and dtype. What the kernels that read the cache share, so
// that they read it by one formula: paged attention's kernels
// (paged_attention_io.glsl) and block-sparse attention's over the paged
// cache (block_sparse_io.glsl, BS_PAGED_KV).
// The including file gives the cache as its push constants hold it:
//   PA_CACHE_CHUNK_TABLE       the chunk table's device address (uint64_t)
//   PA_CACHE_NUM_K_CHUNKS      K chunks (the table's V entries follow them)
//   PA_CACHE_BLOCKS_PER_CHUNK  blocks per chunk
//   PA_CACHE_CHUNK_MAGIC       vka_kv_chunk_magic(blocks per chunk)
//   PA_CACHE_READ (optional)   whether the kernel reads a cache at all; where
//                              false, the chunk bases are neither read nor stored
// and the constants PA_FP8_CACHE and PA_ESIZE (the cache's element), besides
// the spec constants PA_BLOCK_SIZE, PA_NUM_KV_HEADS, PA_HEAD_SIZE, PA_LAYOUT
// and PA_CACHE_DTYPE. Include after kv_addressing.glsl.
#ifndef VKATTN_KV_CACHE_READS_GLSL
#define VKATTN_KV_CACHE_READS_GLSL

layout(buffer_reference, std430, buffer_reference_align = 2) readonly buffer Kv16 { uint16_t v; };
layout(buffer_reference, std430, buffer_reference_align = 1) readonly buffer Kv8 { uint8_t v; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Kv16x8 { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Kv8x8 { uvec2 v; };

const uint64_t PA_BLOCK_BYTES = uint64_t(PA_BLOCK_SIZE) * PA_NUM_KV_HEADS * PA_HEAD_SIZE * PA_ESIZE;

// The first PA_SHARED_CHUNKS K and V chunk bases, read once per workgroup,
// so that a key's address needs no dependent load. A cache of more chunks
// (more than 8 x 4 GiB of K on an H200, or an application's small chunks)
// reads the others' from the table in memory at each use. Each byte counts:
// two workgroups of 4 subgroups share an SM's 48 KiB (abi/paged_attention.h).
shared uint64_t pa_chunk_base[2u * PA_SHARED_CHUNKS];

// Shared slot i holds K chunk i (i < n) or V chunk i - n, n = this count.
uint pa_shared_chunks() { return min(PA_CACHE_NUM_K_CHUNKS, PA_SHARED_CHUNKS); }
// In two halves, so that a kernel can issue the loads before its own first
// ones (the item's lengths) and store them after: pa_fetch_chunk_base loads
// this invocation's first entry, pa_store_chunk_bases stores it and loads
// and stores any others (none where 2 x PA_SHARED_CHUNKS <= the workgroup
// size). Every invocation calls both; a barrier() must follow before
// pa_block_address.
uint64_t pa_fetch_chunk_base() {
#ifdef PA_CACHE_READ
  if (!(PA_CACHE_READ)) return 0ul;
#endif
  const uint n = pa_shared_chunks(), i = gl_LocalInvocationIndex;
  return i < 2u * n ? VkaChunkTable(PA_CACHE_CHUNK_TABLE).address[i < n ? i : PA_CACHE_NUM_K_CHUNKS + i - n] : 0ul;
}
void pa_store_chunk_bases(uint64_t first) {
#ifdef PA_CACHE_READ
  if (!(PA_CACHE_READ)) return;
#endif
  const uint n = pa_shared_chunks(), i0 = gl_LocalInvocationIndex;
  if (i0 < 2u * n) pa_chunk_base[i0 < n ? i0 : PA_SHARED_CHUNKS + i0 - n] = first;
  for (uint i = i0 + PA_WORKGROUP_SIZE; i < 2u * n; i += PA_WORKGROUP_SIZE)
    pa_chunk_base[i < n ? i : PA_SHARED_CHUNKS + i - n] =
        VkaChunkTable(PA_CACHE_CHUNK_TABLE).address[i < n ? i : PA_CACHE_NUM_K_CHUNKS + i - n];
}
void pa_load_chunk_bases() { pa_store_chunk_bases(pa_fetch_chunk_base()); }

uint64_t pa_block_address(bool is_value, uint block) {
  uint chunk;
  uint64_t offset;
  vka_kv_locate_block(block, PA_CACHE_BLOCKS_PER_CHUNK, PA_CACHE_CHUNK_MAGIC, PA_BLOCK_BYTES, chunk, offset);
  if (chunk < PA_SHARED_CHUNKS) return pa_chunk_base[(is_value ? PA_SHARED_CHUNKS : 0u) + chunk] + offset;
  return VkaChunkTable(PA_CACHE_CHUNK_TABLE).address[(is_value ? PA_CACHE_NUM_K_CHUNKS : 0u) + chunk] + offset;
}

// Zeros one block of one head long (PagedKvCache::finish), so that a key's
// dims from here read 0 in every layout: the prefill kernel's address for the
// cache's keys outside its item.
uint64_t pa_zeros_address() { return PA_CACHE_CHUNK_TABLE + uint64_t(KV_CHUNK_TABLE_ZEROS_OFFSET); }

// The body of a load of eight consecutive head dims (d, ..., d+7; d a
// multiple of 8) of a key, raw, from ADDR(dim, is_value), the address of one
// dim: one 16-byte (f16/bf16) or 8-byte (fp8) load where the layout keeps
// them contiguous (every layout but split V, whose dims lie block_size
// apart). A macro over the address so that each of its two callers below
// keeps its own address arithmetic: with the slot's address written as a
// block plus a zero slot index (pa_load_raw8_at's form), the prefix-prefill
// specialization of the prefill kernel ran 2.2x slower on the NVIDIA driver
// with no spill reported, and with the block's address written as a slot
// address plus the dims (pa_load_slot_raw8's), the decode kernel 2% slower
// (DEVELOPERS.md, "One load helper, two address forms"). Used as a
// function's whole body: it reads the parameters `is_value` and `d`, and
// ADDR may read that function's own parameters and the body's `x`.
#define PA_RAW8_LOAD(ADDR)                                                          \
  const uint x = 16u / PA_ESIZE;                                                    \
  if (is_value && PA_LAYOUT == KV_LAYOUT_SPLIT) {                                   \
    uvec4 w = uvec4(0);                                                             \
    [[unroll]] for (uint i = 0; i < 8u; ++i) {                                      \
      const uint64_t a = ADDR(d + i, true);                                         \
      if (PA_FP8_CACHE) w[i / 4u] |= uint(Kv8(a).v) << (8u * (i % 4u));            \
      else w[i / 2u] |= uint(Kv16(a).v) << (16u * (i % 2u));                       \
    }                                                                               \
    return w;                                                                       \
  }                                                                                 \
  const uint64_t a = ADDR(d, is_value);                                             \
  if (PA_FP8_CACHE) return uvec4(Kv8x8(a).v, 0u, 0u);                              \
  return Kv16x8(a).v;

// A key's eight dims from `base` and the element index `slot` of its slot and
// head there (vka_kv_slot_in_block's part; each dim adds vka_kv_dims_in_block's).
#define PA_RAW8_AT_ELEMENT(dim, v) (base + uint64_t(slot + vka_kv_dims_in_block(PA_LAYOUT, v, dim, PA_BLOCK_SIZE, x)) * PA_ESIZE)
uvec4 pa_load_raw8_at(uint64_t base, uint slot, bool is_value, uint d) { PA_RAW8_LOAD(PA_RAW8_AT_ELEMENT) }

// Element (t, h, 0)'s index in a block: vka_kv_slot_in_block's part.
uint pa_slot_in_block(bool is_value, uint t, uint h) {
  return vka_kv_slot_in_block(PA_LAYOUT, is_value, t, h, PA_BLOCK_SIZE, PA_NUM_KV_HEADS, PA_HEAD_SIZE, 16u / PA_ESIZE);
}

// The eight dims of key slot t of head h of a block.
uvec4 pa_load_raw8(uint64_t block, bool is_value, uint t, uint h, uint d) {
  return pa_load_raw8_at(block, pa_slot_in_block(is_value, t, h), is_value, d);
}

// Where key slot t of head h starts in a block (element (t, h, 0)), so that
// a kernel that loads many pieces of one key locates its slot once and adds
// only each piece's dims (pa_load_slot_raw8).
uint64_t pa_slot_address(uint64_t block, bool is_value, uint t, uint h) {
  return block + uint64_t(pa_slot_in_block(is_value, t, h)) * PA_ESIZE;
}
// The eight dims of the key slot at `slot` (pa_slot_address).
#define PA_RAW8_AT_SLOT(dim, v) (slot + uint64_t(vka_kv_dims_in_block(PA_LAYOUT, v, dim, PA_BLOCK_SIZE, x)) * PA_ESIZE)
uvec4 pa_load_slot_raw8(uint64_t slot, bool is_value, uint d) { PA_RAW8_LOAD(PA_RAW8_AT_SLOT) }

// Raw bits of V at eight consecutive key slots (t, ..., t+7; t a multiple of
// 8, the block size a multiple of 16) of head dim d of a split-layout block,
// which keeps each head's V transposed ([head_size][block_size]): one
// 16-byte (f16/bf16) or 8-byte (fp8) load, where pa_load_raw8 gathers eight
// elements block_size apart.
uvec4 pa_load_split_v8(uint64_t block, uint t, uint h, uint d) {
  const uint e = vka_kv_element_in_block(KV_LAYOUT_SPLIT, true, t, h, d, PA_BLOCK_SIZE, PA_NUM_KV_HEADS, PA_HEAD_SIZE, 16u / PA_ESIZE);
  const uint64_t a = block + uint64_t(e) * PA_ESIZE;
  if (PA_FP8_CACHE) return uvec4(Kv8x8(a).v, 0u, 0u);
  return Kv16x8(a).v;
}

// Raw bits of sixteen consecutive fp8 head dims (d a multiple of 16) of key
// slot t of a block: one 16-byte load, in every layout but split V (whose
// dims lie block_size apart; split K keeps 16 together).
uvec4 pa_load_raw16_fp8(uint64_t block, bool is_value, uint t, uint h, uint d) {
  const uint e = vka_kv_element_in_block(PA_LAYOUT, is_value, t, h, d, PA_BLOCK_SIZE, PA_NUM_KV_HEADS, PA_HEAD_SIZE, 16u);
  return Kv16x8(block + uint64_t(e)).v;
}

// The matrix kernels stage an e4m3 cache's values as value * 2^-8
// (matrix_element.glsl: f16 bits by shifts, exact, and in bf16 modules
// those converted exactly); their scales undo it.
const float PA_STAGED_FP8_FACTOR = PA_CACHE_DTYPE == DTYPE_FP8_E4M3 ? 256.0 : 1.0;
#endif
