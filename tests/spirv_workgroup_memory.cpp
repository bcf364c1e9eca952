#include "spirv_workgroup_memory.hpp"

#include <stdexcept>
#include <unordered_map>

namespace vkattn::test {
namespace {

// SPIR-V opcodes and enumerants this reader understands (SPIR-V 1.6 spec).
enum Op : uint32_t {
  OpName = 5,
  OpTypeBool = 20,
  OpTypeInt = 21,
  OpTypeFloat = 22,
  OpTypeVector = 23,
  OpTypeMatrix = 24,
  OpTypeArray = 28,
  OpTypeRuntimeArray = 29,
  OpTypeStruct = 30,
  OpTypePointer = 32,
  OpConstantTrue = 41,
  OpConstantFalse = 42,
  OpConstant = 43,
  OpSpecConstantTrue = 48,
  OpSpecConstantFalse = 49,
  OpSpecConstant = 50,
  OpSpecConstantOp = 52,
  OpVariable = 59,
  OpAccessChain = 65,
  OpInBoundsAccessChain = 66,
  OpPtrAccessChain = 67,
  OpDecorate = 71,
  OpCopyObject = 83,
  OpUConvert = 113,
  OpSConvert = 114,
  OpIAdd = 128,
  OpISub = 130,
  OpIMul = 132,
  OpUDiv = 134,
  OpSDiv = 135,
  OpUMod = 137,
  OpSRem = 138,
  OpSMod = 139,
  OpLogicalEqual = 164,
  OpLogicalNotEqual = 165,
  OpLogicalOr = 166,
  OpLogicalAnd = 167,
  OpLogicalNot = 168,
  OpSelect = 169,
  OpIEqual = 170,
  OpINotEqual = 171,
  OpUGreaterThan = 172,
  OpSGreaterThan = 173,
  OpUGreaterThanEqual = 174,
  OpSGreaterThanEqual = 175,
  OpULessThan = 176,
  OpSLessThan = 177,
  OpULessThanEqual = 178,
  OpSLessThanEqual = 179,
  OpShiftRightLogical = 194,
  OpShiftRightArithmetic = 195,
  OpShiftLeftLogical = 196,
  OpBitwiseOr = 197,
  OpBitwiseXor = 198,
  OpBitwiseAnd = 199,
  OpNot = 200,
  OpCooperativeMatrixLoadKHR = 4457,
  OpCooperativeMatrixStoreKHR = 4458,
  OpCooperativeMatrixLoadNV = 5359,
  OpCooperativeMatrixStoreNV = 5360,
  OpCooperativeMatrixLoadTensorNV = 5367,
  OpCooperativeMatrixStoreTensorNV = 5368,
};
constexpr uint32_t kDecorationSpecId = 1;
constexpr uint32_t kStorageWorkgroup = 4;

struct Instruction {
  uint32_t op;
  std::span<const uint32_t> operands;   // the words after the first
};

struct Module {
  std::unordered_map<uint32_t, Instruction> defs;   // result id -> its instruction (types, constants)
  std::unordered_map<uint32_t, uint32_t> spec_ids;
  std::unordered_map<uint32_t, std::string> names;
  std::vector<std::pair<uint32_t, uint32_t>> workgroup;   // (variable id, pointer type id)
  std::unordered_map<uint32_t, uint32_t> pointer_base;      // access chain or copy -> the pointer it derives from
  std::vector<std::pair<uint32_t, uint32_t>> matrix_memory;  // (cooperative-matrix load/store opcode, its pointer id)
};

[[noreturn]] void unsupported(const std::string& what) { throw std::runtime_error("spirv_workgroup_memory: " + what); }

Module parse(std::span<const uint32_t> words) {
  if (words.size() < 5 || words[0] != 0x07230203u) unsupported("not a SPIR-V module");
  Module m;
  for (size_t at = 5; at < words.size();) {
    const uint32_t count = words[at] >> 16, op = words[at] & 0xFFFFu;
    if (count == 0 || at + count > words.size()) unsupported("a truncated instruction");
    const Instruction in{op, words.subspan(at + 1, count - 1)};
    at += count;
    const auto& w = in.operands;
    switch (op) {
      case OpName: {
        std::string s;
        for (size_t i = 1; i < w.size(); ++i)
          for (int b = 0; b < 4; ++b) {
            const char c = char((w[i] >> (8 * b)) & 0xFFu);
            if (c == 0) goto named;
            s += c;
          }
      named:
        m.names[w[0]] = s;
        break;
      }
      case OpDecorate:
        if (w.size() >= 3 && w[1] == kDecorationSpecId) m.spec_ids[w[0]] = w[2];
        break;
      case OpTypeBool: case OpTypeInt: case OpTypeFloat: case OpTypeVector: case OpTypeMatrix:
      case OpTypeArray: case OpTypeStruct: case OpTypePointer:
        m.defs.emplace(w[0], in);
        break;
      case OpConstantTrue: case OpConstantFalse: case OpConstant: case OpSpecConstantTrue:
      case OpSpecConstantFalse: case OpSpecConstant: case OpSpecConstantOp:
        m.defs.emplace(w[1], in);
        break;
      case OpVariable:
        if (w.size() >= 3 && w[2] == kStorageWorkgroup) m.workgroup.emplace_back(w[1], w[0]);
        break;
      case OpAccessChain: case OpInBoundsAccessChain: case OpPtrAccessChain: case OpCopyObject:
        if (w.size() >= 3) m.pointer_base[w[1]] = w[2];
        break;
      // The pointer operand: after the result type and id for loads, first for stores.
      case OpCooperativeMatrixLoadKHR: case OpCooperativeMatrixLoadNV: case OpCooperativeMatrixLoadTensorNV:
        if (w.size() >= 3) m.matrix_memory.emplace_back(op, w[2]);
        break;
      case OpCooperativeMatrixStoreKHR: case OpCooperativeMatrixStoreNV: case OpCooperativeMatrixStoreTensorNV:
        if (!w.empty()) m.matrix_memory.emplace_back(op, w[0]);
        break;
      default:
        break;
    }
  }
  return m;
}

class Evaluator {
 public:
  Evaluator(const Module& m, const std::map<uint32_t, uint32_t>& spec) : m_(m), spec_(spec) {}

  uint64_t bytes(uint32_t type) const {
    const Instruction& t = def(type);
    const auto& w = t.operands;
    switch (t.op) {
      case OpTypeBool: return 4;   // (no defined size; drivers store a word)
      case OpTypeInt: case OpTypeFloat: return w[1] / 8;
      case OpTypeVector: case OpTypeMatrix: return uint64_t(w[2]) * bytes(w[1]);
      case OpTypeArray: return value(w[2]) * bytes(w[1]);
      case OpTypeStruct: {
        uint64_t sum = 0;
        for (size_t i = 1; i < w.size(); ++i) sum += bytes(w[i]);
        return sum;
      }
      default: unsupported("type opcode " + std::to_string(t.op) + " in shared memory");
    }
  }

  uint64_t value(uint32_t id) const {
    const Instruction& c = def(id);
    const auto& w = c.operands;
    const auto over = [&](uint64_t v) {
      const auto s = m_.spec_ids.find(id);
      if (s == m_.spec_ids.end()) return v;
      const auto o = spec_.find(s->second);
      return o == spec_.end() ? v : uint64_t(o->second);
    };
    switch (c.op) {
      case OpConstantTrue: return 1;
      case OpConstantFalse: return 0;
      case OpConstant: return w.size() > 3 ? (uint64_t(w[3]) << 32 | w[2]) : w[2];
      case OpSpecConstantTrue: return over(1) != 0;
      case OpSpecConstantFalse: return over(0) != 0;
      case OpSpecConstant: return over(w.size() > 3 ? (uint64_t(w[3]) << 32 | w[2]) : w[2]) & mask(w[0]);
      case OpSpecConstantOp: return operation(w[0], w[2], w.subspan(3)) & mask(w[0]);
      default: unsupported("id %" + std::to_string(id) + " is not a constant (opcode " + std::to_string(c.op) + ")");
    }
  }

 private:
  const Instruction& def(uint32_t id) const {
    const auto d = m_.defs.find(id);
    if (d == m_.defs.end()) unsupported("no definition of id %" + std::to_string(id));
    return d->second;
  }
  uint32_t width(uint32_t type) const {
    const Instruction& t = def(type);
    if (t.op == OpTypeBool) return 1;
    if (t.op == OpTypeInt) return t.operands[1];
    unsupported("a specialization constant of type opcode " + std::to_string(t.op));
  }
  uint64_t mask(uint32_t type) const {
    const uint32_t b = width(type);
    return b >= 64 ? ~uint64_t(0) : (uint64_t(1) << b) - 1;
  }
  int64_t as_signed(uint32_t id) const {
    const uint32_t b = width(type_of(id));
    const uint64_t v = value(id);
    return b >= 64 ? int64_t(v) : int64_t(v << (64 - b)) >> (64 - b);
  }
  uint32_t type_of(uint32_t id) const {
    const Instruction& c = def(id);
    return c.operands[0];
  }

  uint64_t operation(uint32_t type, uint32_t op, std::span<const uint32_t> a) const {
    const auto u = [&](size_t i) { return value(a[i]); };
    const auto s = [&](size_t i) { return as_signed(a[i]); };
    const auto nonzero = [&](uint64_t d) {
      if (d == 0) unsupported("a division by zero in a specialization constant");
      return d;
    };
    switch (op) {
      case OpUConvert: return u(0);
      case OpSConvert: return uint64_t(s(0));
      case OpIAdd: return u(0) + u(1);
      case OpISub: return u(0) - u(1);
      case OpIMul: return u(0) * u(1);
      case OpUDiv: return u(0) / nonzero(u(1));
      case OpSDiv: return uint64_t(s(0) / int64_t(nonzero(u(1))));
      case OpUMod: return u(0) % nonzero(u(1));
      case OpSRem: return uint64_t(s(0) % int64_t(nonzero(u(1))));
      case OpSMod: {
        const int64_t d = s(1), r = s(0) % int64_t(nonzero(uint64_t(d)));
        return uint64_t(r != 0 && ((r < 0) != (d < 0)) ? r + d : r);
      }
      case OpLogicalEqual: return (u(0) != 0) == (u(1) != 0);
      case OpLogicalNotEqual: return (u(0) != 0) != (u(1) != 0);
      case OpLogicalOr: return u(0) != 0 || u(1) != 0;
      case OpLogicalAnd: return u(0) != 0 && u(1) != 0;
      case OpLogicalNot: return u(0) == 0;
      case OpSelect: return u(0) != 0 ? u(1) : u(2);
      case OpIEqual: return u(0) == u(1);
      case OpINotEqual: return u(0) != u(1);
      case OpUGreaterThan: return u(0) > u(1);
      case OpSGreaterThan: return s(0) > s(1);
      case OpUGreaterThanEqual: return u(0) >= u(1);
      case OpSGreaterThanEqual: return s(0) >= s(1);
      case OpULessThan: return u(0) < u(1);
      case OpSLessThan: return s(0) < s(1);
      case OpULessThanEqual: return u(0) <= u(1);
      case OpSLessThanEqual: return s(0) <= s(1);
      case OpShiftRightLogical: return u(0) >> u(1);
      case OpShiftRightArithmetic: return uint64_t(s(0) >> u(1));
      case OpShiftLeftLogical: return u(0) << u(1);
      case OpBitwiseOr: return u(0) | u(1);
      case OpBitwiseXor: return u(0) ^ u(1);
      case OpBitwiseAnd: return u(0) & u(1);
      case OpNot: return ~u(0);
      default: unsupported("specialization-constant operation " + std::to_string(op) + " (type %" + std::to_string(type) + ")");
    }
  }

  const Module& m_;
  const std::map<uint32_t, uint32_t>& spec_;
};

}  // namespace

std::vector<WorkgroupVariable> workgroup_variables(std::span<const uint32_t> words, const std::map<uint32_t, uint32_t>& spec) {
  const Module m = parse(words);
  const Evaluator e(m, spec);
  std::vector<WorkgroupVariable> out;
  for (const auto& [id, pointer] : m.workgroup) {
    const auto p = m.defs.find(pointer);
    if (p == m.defs.end() || p->second.op != OpTypePointer) unsupported("a Workgroup variable without a pointer type");
    const auto n = m.names.find(id);
    out.push_back({n != m.names.end() ? n->second : "%" + std::to_string(id), e.bytes(p->second.operands[2])});
  }
  return out;
}

std::vector<SharedMatrixAccess> shared_matrix_accesses(std::span<const uint32_t> words) {
  const Module m = parse(words);
  const Evaluator e(m, {});
  std::unordered_map<uint32_t, uint32_t> variable_type;
  for (const auto& [id, pointer] : m.workgroup) variable_type[id] = pointer;
  std::vector<SharedMatrixAccess> out;
  for (const auto& [op, pointer] : m.matrix_memory) {
    uint32_t id = pointer;
    for (auto b = m.pointer_base.find(id); b != m.pointer_base.end(); b = m.pointer_base.find(id)) id = b->second;
    const auto v = variable_type.find(id);
    if (v == variable_type.end()) continue;   // (not shared memory)
    const auto p = m.defs.find(v->second);
    if (p == m.defs.end() || p->second.op != OpTypePointer) unsupported("a Workgroup variable without a pointer type");
    const auto a = m.defs.find(p->second.operands[2]);
    const bool array = a != m.defs.end() && (a->second.op == OpTypeArray || a->second.op == OpTypeRuntimeArray);
    const auto n = m.names.find(id);
    out.push_back({n != m.names.end() ? n->second : "%" + std::to_string(id), op, array ? e.bytes(a->second.operands[1]) : 0});
  }
  return out;
}

uint64_t workgroup_bytes(std::span<const uint32_t> words, const std::map<uint32_t, uint32_t>& spec) {
  uint64_t sum = 0;
  for (const auto& v : workgroup_variables(words, spec)) sum += v.bytes;
  return sum;
}

}  // namespace vkattn::test
