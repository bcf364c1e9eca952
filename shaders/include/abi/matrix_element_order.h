// The order of a lane's elements of a subgroup-scope 16 x 16 f16 A matrix,
// and the rows of a 16 x 16 f32 accumulator's (KHR cooperative matrices
// leave both to the implementation). The decode
// kernel builds K and V matrices of fp8 caches in registers in this order
// (paged_attention_subgroup.comp, REGISTER_MATRICES), where the Context found
// it on the device (matrix_element_order.comp, Capabilities::
// coopmat_register_order): NVIDIA's mma.m16n8k16 A fragment, with 32 lanes,
// lane 4 g + t holding (g, 2t), (g, 2t+1), (g, 2t+8), (g, 2t+9), then the
// same columns of row g + 8. The prefill kernel's softmax in registers
// (paged_prefill.comp) takes a 16 x 16 f32 accumulator's elements to lie in
// the same positions: it works on them by row, its KHR module masks them by
// column and sets P's A elements from them.
#ifndef VKATTN_ABI_MATRIX_ELEMENT_ORDER_H
#define VKATTN_ABI_MATRIX_ELEMENT_ORDER_H
#include "common.h"

#define MEO_LANES 32u
#define MEO_ELEMENTS 8u   /* per lane */
// The row of element i of lane `lane`, in the order above, and row * 16 +
// column. A 16 x 16 f32 accumulator's elements lie in the same positions
// (the probe checks it).
#define MEO_ROW(lane, i) (((lane) / 4u) + 8u * ((i) / 4u))
#define MEO_POSITION(lane, i) (MEO_ROW(lane, i) * 16u + 2u * ((lane) % 4u) + (i) % 2u + 8u * (((i) / 2u) % 2u))
// The probe's output: word 0 the elements per lane (the matrix's length()),
// then, for lane l and element i, word 1 + l * MEO_ELEMENTS + i its position;
// then the same for a 16 x 16 f32 accumulator, from word MEO_ACC_WORDS on.
#define MEO_ACC_WORDS (1u + MEO_LANES * MEO_ELEMENTS)
#define MEO_OUTPUT_WORDS (2u * MEO_ACC_WORDS)
#endif
