// Test helper: the shared (Workgroup) memory a SPIR-V module declares for
// given specialization constants, read from the module itself, so that the
// ABI's shared-memory counts (abi/*.h), which the host's tile choices use,
// can be checked against what the shaders really declare on any machine,
// with no driver involved; and the shared arrays that cooperative matrices
// are loaded from or stored to, whose elements Vulkan's alignment rule
// constrains (tests/test_shared_matrix_alignment.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace vkattn::test {

struct WorkgroupVariable {
  std::string name;     // OpName, or "%<id>" without one
  uint64_t bytes = 0;   // element sizes times array lengths (no padding)
};

// Every Workgroup-storage variable of `words`, its size evaluated with the
// specialization constants `spec` (SpecId -> value; the module's defaults
// for the others). Throws std::runtime_error on a construct it does not
// evaluate (an unknown opcode in a size's specialization-constant
// expression, an opaque type in shared memory), so that a test cannot pass
// on a size it did not compute.
std::vector<WorkgroupVariable> workgroup_variables(std::span<const uint32_t> words, const std::map<uint32_t, uint32_t>& spec);

uint64_t workgroup_bytes(std::span<const uint32_t> words, const std::map<uint32_t, uint32_t>& spec);

// A cooperative-matrix load or store (KHR, NV, NV tensor) whose pointer
// derives from a shared variable.
struct SharedMatrixAccess {
  std::string variable;         // as WorkgroupVariable::name
  uint32_t opcode = 0;          // the SPIR-V opcode
  uint64_t element_bytes = 0;   // of the variable's array element; 0 where the variable is no array
};

// Every such access of `words`, in module order.
std::vector<SharedMatrixAccess> shared_matrix_accesses(std::span<const uint32_t> words);

}  // namespace vkattn::test
