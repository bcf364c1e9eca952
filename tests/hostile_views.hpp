// The hostile-input tests' views: what an op requires of each, where a
// valid one is placed (a canary arena, at a random offset, sometimes with
// padded rows), and the ways to break one, each with what the op's error
// must then say.
#pragma once
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "canary_arena.hpp"
#include "hostile_generator.hpp"

namespace vkattn::test {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
inline const std::string kNoCommandBuffer = "the command buffer is VK_NULL_HANDLE";

// What an op requires of one of its views.
struct ViewRule {
  std::string name;
  std::vector<DType> dtypes;    // allowed
  std::vector<int64_t> shape;   // -1: any extent
  bool output = false;
  bool bound = false;           // the op gets as far as binding it (buffer, alignment and bounds checks)
  bool sets_count = false;      // its first extent is the op's count (write_kv_cache's key): others must match it
};

// The strides a view has, written out.
inline std::vector<int64_t> effective_strides(const TensorView& v) {
  std::vector<int64_t> s(v.shape.size());
  for (std::size_t d = 0; d < s.size(); ++d) s[d] = v.stride(d);
  return s;
}

// A view of `shape` in the arena at a random offset (aligned to its element,
// or to 16 bytes), sometimes with rows further apart than their size.
inline TensorView place_view(ref::Rng& r, CanaryArena& a, DType t, std::vector<int64_t> shape, const std::string& name, bool may_pad = true) {
  TensorView v = TensorView::contiguous(a.ref(), t, std::move(shape));
  if (may_pad && v.shape.size() >= 2 && r.below(3) == 0) {
    v.strides = effective_strides(v);
    v.strides[0] += 1 + r.below(8);
  }
  const VkDeviceSize bytes = std::max<VkDeviceSize>(v.end_byte(), 1);
  v.offset = a.place(bytes, r.below(2) ? 16 : dtype_size(t), name);
  return v;
}

// A split run's workspace as the header asks for it: its arrival counters 0.
inline void zero_workspace_counters(CanaryArena& a, const TensorView& ws) {
  const std::vector<uint8_t> zeros(std::min<uint64_t>(ws.end_byte() - ws.offset, kPagedAttentionWorkspaceCounterBytes), 0);
  if (!zeros.empty()) a.write(ws.offset, zeros.data(), zeros.size());
}

// Breaks `v` in one random way and says what the error must name; nullopt
// when the chosen way does not apply to this view.
inline std::optional<Expect> break_view(ref::Rng& r, const std::string& op, const ViewRule& rule, TensorView& v, const BufferRef& foreign) {
  const std::string who = op + ": " + rule.name;
  const std::size_t rank = v.shape.size();
  const VkDeviceSize es = dtype_size(v.dtype);
  auto expect = [&](const std::string& kind, std::vector<std::string> f) { return Expect{rule.name + " " + kind, std::move(f)}; };
  switch (r.below(14)) {
    case 0:
      v.dtype = bad_dtype(r, rule.dtypes);
      return expect("dtype", {who + " has dtype"});
    case 1:
      if (rank > 1 && r.below(2)) v.shape.erase(v.shape.begin() + r.below(static_cast<uint32_t>(rank)));
      else v.shape.insert(v.shape.begin() + r.below(static_cast<uint32_t>(rank + 1)), 1);
      v.strides.clear();
      return expect("rank", {who + " has shape"});
    case 2: {   // an extent other than the one required (or negative)
      const uint32_t d = r.below(static_cast<uint32_t>(rank));
      const int64_t want = rule.shape[d];
      const int64_t bad = want < 0 ? pick<int64_t>(r, {-1, -7, std::numeric_limits<int64_t>::min()})
                                   : pick<int64_t>(r, {want + 1, want + 7, want - 1, -1, std::numeric_limits<int64_t>::min()});
      if (bad == want) return std::nullopt;
      v.shape[d] = bad;
      if (rule.sets_count && d == 0 && bad >= 0) return expect("count", {op + ": value has shape"});
      return expect("extent", {who + " has shape"});
    }
    case 3:   // strides given for a different number of dimensions
      v.strides.assign(rank > 1 && r.below(2) ? rank - 1 : rank + 1, 1);
      return expect("stride count", {who, "strides"});
    case 4:
      if (rank == 0 || v.shape.back() <= 1) return std::nullopt;
      v.strides = effective_strides(v);
      v.strides.back() = pick<int64_t>(r, {0, 2, -1, kMax64});
      return expect("inner stride", {who + " must be contiguous"});
    case 5:
      if (rank < 2) return std::nullopt;
      v.strides = effective_strides(v);
      v.strides[0] = -pick<int64_t>(r, {1, v.strides[0] + 1, int64_t(1) << 40});
      return expect("negative stride", {who + ": stride -"});
    case 6:
      if (rank < 2) return std::nullopt;
      v.strides = effective_strides(v);
      v.strides[0] = pick<int64_t>(r, {int64_t(1) << 32, (int64_t(1) << 32) + 77, int64_t(1) << 50, kMax64});
      return expect("huge stride", {who, "stride"});
    case 7:
      if (!rule.bound || es == 1) return std::nullopt;
      v.offset += 1 + r.below(static_cast<uint32_t>(es - 1));
      return expect("misaligned offset", {who + ": byte offset"});
    case 8: {   // past the buffer's end, by a little or a lot, or with a size that lies
      if (!rule.bound || v.numel() <= 0) return std::nullopt;
      const VkDeviceSize span = v.end_byte() - v.offset;
      switch (r.below(4)) {
        case 0: v.offset = (v.buffer.size - span) / es * es + es * (1 + r.below(4)); break;
        case 1: v.offset = (VkDeviceSize(1) << 62) / es * es; break;
        case 2: v.offset = std::numeric_limits<VkDeviceSize>::max() / es * es - es * r.below(4); break;   // wraps end_byte
        default: v.buffer.size = v.end_byte() - 1 - r.below(static_cast<uint32_t>(std::min<VkDeviceSize>(span, 64))); break;
      }
      return Expect{rule.name + " past the end", {who}, {"overlaps", " " + rule.name + " (bytes"}};
    }
    case 9:
      if (!rule.bound) return std::nullopt;
      v.buffer.buffer = VK_NULL_HANDLE;
      return expect("null buffer", {who + ": the buffer is VK_NULL_HANDLE"});
    case 10:
      if (!rule.bound) return std::nullopt;
      v.buffer = foreign;
      return expect("foreign buffer", {who + ": the buffer belongs to another Context"});
    case 11: {   // an extent no buffer holds, where any extent is allowed
      std::vector<uint32_t> dims;
      for (std::size_t d = 0; d < rank; ++d)
        if (rule.shape[d] < 0) dims.push_back(static_cast<uint32_t>(d));
      if (dims.empty()) return std::nullopt;
      const int64_t huge = pick<int64_t>(r, {int64_t(1) << 61, (int64_t(1) << 62) + (1 << 20), int64_t(1) << 62, kMax64,
                                             int64_t(1) << 31, int64_t(1) << 40});
      if (huge < (int64_t(1) << 61) && !rule.bound) return std::nullopt;   // never bound, never read: allowed
      v.shape[dims[r.below(static_cast<uint32_t>(dims.size()))]] = huge;
      if (!v.strides.empty()) v.strides = {};   // contiguous, so that only the extent is wrong
      return Expect{rule.name + " huge extent", {who}, {"overlaps", " " + rule.name + " (bytes"}};
    }
    case 12: {   // an output whose elements share memory
      if (!rule.output) return std::nullopt;
      if (v.numel() == 0) return std::nullopt;   // no elements, none to share: accepted
      std::vector<uint32_t> dims;
      for (std::size_t d = 0; d + 1 < rank; ++d)
        if (v.shape[d] > 1) dims.push_back(static_cast<uint32_t>(d));
      if (dims.empty()) return std::nullopt;
      v.strides = effective_strides(v);
      const uint32_t d = dims[r.below(static_cast<uint32_t>(dims.size()))];
      v.strides[d] = r.below(2) ? 0 : std::max<int64_t>(v.strides[d + 1] * v.shape[d + 1] - 1, 0);
      return expect("aliased elements", {who, "share memory"});
    }
    default:
      return std::nullopt;
  }
}

// Moves view `a` onto view `b` (same buffer, overlapping bytes): one of them
// must be an output. The error names `a` (it may have landed on a third view too).
inline Expect overlap(TensorView& a, const std::string& a_name, const TensorView& b, const std::string& b_name) {
  const VkDeviceSize es = dtype_size(a.dtype);
  a.buffer = b.buffer;
  a.offset = b.offset / es * es;
  return {a_name + " over " + b_name, {"overlaps", " " + a_name + " (bytes"}};
}

}  // namespace vkattn::test
