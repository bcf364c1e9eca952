// The context's status buffer (binding 0 of every kernel): kernels that meet
// bad device-side input record the first problem here and skip the access,
// instead of touching memory out of bounds. The host turns it into an error.
#ifndef VKATTN_STATUS_GLSL
#define VKATTN_STATUS_GLSL
#include "abi/common.h"

layout(set = 0, binding = 0, std430) buffer VkaStatus { uint vka_status[]; };

void vka_report(uint code, uint a, uint b, uint c) {
  if (atomicCompSwap(vka_status[0], 0u, code) == 0u) {
    vka_status[1] = a;
    vka_status[2] = b;
    vka_status[3] = c;
  }
}
#endif
