// Eight consecutive elements of a K or V tensor bound twice (as 16-bit
// elements and as 16-byte words): one 16-byte load where the row allows it,
// else eight 2-byte ones ("narrow": offsets or strides that are not multiples
// of 8 elements). GLSL cannot pass a buffer to a function, so the loader is
// defined for each pair of bindings by this macro: prefix prefill's new K/V
// views (paged_attention_io.glsl) and block-sparse attention's K/V tensors
// (block_sparse_io.glsl) use it.
#ifndef VKATTN_KV_TENSOR_LOADS_GLSL
#define VKATTN_KV_TENSOR_LOADS_GLSL

// The body of a function that returns elements at .. at + 7 (at a multiple
// of 8 if `wide`) of a 16-bit tensor bound as 16-byte words (VEC) and as
// 16-bit elements (E16): one 16-byte load if `wide`, else eight 2-byte ones.
// (Statements, not a function: GLSL cannot pass a buffer.)
#define VKA_RAW8_BODY(VEC, E16, wide, at)                                       \
  if (wide) return VEC[(at) / 8u];                                             \
  uvec4 w;                                                                     \
  [[unroll]] for (uint e = 0; e < 4u; ++e) w[e] = uint(E16[(at) + 2u * e]) | (uint(E16[(at) + 2u * e + 1u]) << 16); \
  return w;

// uvec4 NAME(bool narrow, bool is_value, uint at): elements at .. at + 7 (at a
// multiple of 8 unless narrow) of V (is_value) or K.
#define VKA_DEFINE_KV_RAW8(NAME, K_VEC, K16, V_VEC, V16)                          \
  uvec4 NAME(bool narrow, bool is_value, uint at) {                              \
    if (!narrow) return is_value ? V_VEC[at / 8u] : K_VEC[at / 8u];              \
    uvec4 w;                                                                     \
    [[unroll]] for (uint i = 0; i < 4u; ++i) {                                   \
      const uint lo = uint(is_value ? V16[at + 2u * i] : K16[at + 2u * i]);      \
      const uint hi = uint(is_value ? V16[at + 2u * i + 1u] : K16[at + 2u * i + 1u]); \
      w[i] = lo | (hi << 16);                                                    \
    }                                                                            \
    return w;                                                                    \
  }
#endif
