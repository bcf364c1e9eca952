#version 460
// A deliberately slow kernel for the wait and timeout tests: one invocation
// polls a host-visible word until the host writes a non-zero value there,
// then records how often it polled. (The poll count is bounded so that a
// broken test cannot spin for ever.)
#extension GL_KHR_memory_scope_semantics : require
layout(local_size_x = 1) in;
layout(set = 0, binding = 0, std430) buffer Flag { uint go; uint polls; };
void main() {
  uint n = 0u;
  while (atomicLoad(go, gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire) == 0u && n < 0x7FFFFFFFu) ++n;
  polls = n;
}
