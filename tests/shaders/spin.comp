#version 460
// A deliberately slow kernel for the wait and timeout tests: one invocation
// runs a chain of `iterations` dependent multiply-adds (the test calibrates
// the count to the device) and stores the result, so none can be skipped.
// (A kernel that polled host memory for a go-ahead hung on an NVIDIA GPU:
// host writes made after a submission need not become visible to it.)
layout(local_size_x = 1) in;
layout(push_constant) uniform Push { uint iterations; } pc;
layout(set = 0, binding = 0, std430) buffer Result { uint value; };
void main() {
  uint x = value;
  for (uint i = 0u; i < pc.iterations; ++i) x = x * 1664525u + 1013904223u;
  value = x;
}
