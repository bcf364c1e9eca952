// The element type of the matrix kernels' products and of the probe of
// their element order (matrix_element_order.comp): f16, or bf16 where
// PA_MATRIX_BF16 is 1. Needs nothing else, so that the probe includes it
// rather than a copy of it; matrix_element.glsl adds the fp8 conversions.
#ifndef VKATTN_MATRIX_ELEMENT_TYPE_GLSL
#define VKATTN_MATRIX_ELEMENT_TYPE_GLSL

// Shared arrays that cooperative matrices are loaded from or stored to hold
// 16-byte elements (uvec4, vec4): Vulkan asks a matrix load's or store's
// pointer and stride to lie on 16 bytes, and an array of smaller elements
// lies wherever the driver puts it (tests/test_shared_matrix_alignment.cpp).
// Offsets and strides of matrices in such an array count its elements;
// scalars are its 32-bit words: word i of array A.
#define VKA_SHARED_WORD(A, i) A[(i) / 4u][(i) % 4u]

#if PA_MATRIX_BF16
#extension GL_EXT_bfloat16 : require
#define ELEM bfloat16_t
const bool ELEM_IS_BF16 = true;
const uint ELEM_EXPONENT = 0x7F80u;
ELEM elem_from_bits(uint16_t b) { return uintBitsToBFloat16EXT(b); }
uint elem_pair_bits(float a, float b) {
  return uint(bfloat16BitsToUintEXT(bfloat16_t(a))) | (uint(bfloat16BitsToUintEXT(bfloat16_t(b))) << 16);
}
#else
#define ELEM float16_t
const bool ELEM_IS_BF16 = false;
const uint ELEM_EXPONENT = 0x7C00u;
ELEM elem_from_bits(uint16_t b) { return uint16BitsToHalf(b); }
uint elem_pair_bits(float a, float b) { return packHalf2x16(vec2(a, b)); }
#endif

#endif
