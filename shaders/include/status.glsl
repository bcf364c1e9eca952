// The context's status buffer (binding 0 of every kernel): kernels that meet
// bad device-side input record the first problem here and skip the access,
// instead of touching memory out of bounds. The host turns it into an error.
#ifndef VKATTN_STATUS_GLSL
#define VKATTN_STATUS_GLSL
#include "abi/common.h"

layout(set = 0, binding = 0, std430) buffer VkaStatus { uint vka_status[]; };

// The first report claims the slot, writes its details and only then
// publishes its code (abi/common.h gives the order), so that the host, which
// may read the slot while kernels still run, never takes a code without its
// details nor clears details a kernel is writing. Later reports find the
// slot claimed and are dropped until the host has released it.
void vka_report(uint code, uint a, uint b, uint c) {
  if (atomicCompSwap(vka_status[STATUS_CLAIM], 0u, 1u) == 0u) {
    vka_status[1] = a;
    vka_status[2] = b;
    vka_status[3] = c;
    memoryBarrierBuffer();   // the details before the code
    atomicExchange(vka_status[0], code);
  }
}
#endif
