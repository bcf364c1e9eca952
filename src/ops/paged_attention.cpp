// paged_attention: plans (checks, then the host schedule in
// schedule/paged_attention_schedule.cpp), pipelines, and dispatch. Kernels:
// shaders/paged_attention.comp (scalar), paged_attention_subgroup.comp
// (matrix paths), paged_prefill.comp (matrix paths, long sequences, with
// PrefillKernel::on), paged_attention_reduce.comp (split-KV).
#include <vkattn/context.hpp>
#include <vkattn/paged_attention.hpp>
#include <vkattn/prefix_prefill.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

#include "abi/kv_chunk_division.h"
#include "abi/paged_attention.h"
#include "../context_impl.hpp"
#include "../dispatch.hpp"
#include "../op_support.hpp"
#include "paged_attention_plan.hpp"

namespace vkattn {

using namespace detail;

namespace {

constexpr std::string_view kOp = "paged_attention";

[[noreturn]] void fail(const std::string& what) { throw Error("paged_attention: " + what); }

// The path a plan runs on: the context's, except where the matrix kernel
// cannot take the inputs: f16 and bf16 mixed (q of one, cache of the other:
// neither type holds the other), bf16 on a device that multiplies no bf16
// matrices, or subgroups too narrow for its row mapping (16 lanes or more).
Path choose_path(const Context& ctx, DType q_dtype, DType cache_dtype) {
  Path p = ctx.path_for("paged_attention");
  if (p == Path::scalar) return p;
  const bool bf16 = q_dtype == DType::bf16 || cache_dtype == DType::bf16;
  if (bf16 && (q_dtype != DType::bf16 || cache_dtype == DType::f16 || !ctx.capabilities().bf16_matrices)) return Path::scalar;
  const uint32_t sg = ctx.capabilities().subgroup_size;
  if (sg < 16 || sg > 128 || !std::has_single_bit(sg)) return Path::scalar;
  return p;
}

// The matrix kernel's element type: q's (f16 or bf16; choose_path keeps the
// cache's compatible).
ScheduleDevice schedule_device(const Context& ctx, Path path, DType q_dtype) {
  const auto& caps = ctx.capabilities();
  ScheduleDevice d;
  d.path = path;
  d.subgroup_size = caps.subgroup_size;
  d.multiprocessors = caps.scheduling_multiprocessors;
  d.max_shared_memory = caps.max_shared_memory;
  d.has_16x8x16 = caps.has_subgroup_shape(16, 8, 16, q_dtype == DType::bf16 ? "bf16" : "f16");
  d.bf16 = q_dtype == DType::bf16;
  d.prefill_kernel = path != Path::scalar && caps.subgroup_size == 32;
  d.prefill_shared_softmax = !caps.coopmat_register_order;   // (prefill_pipeline's module)
  d.max_binding_bytes = caps.max_storage_buffer_range;
  return d;
}

void check_shapes(const KvCacheConfig& c, uint32_t num_q_heads, DType q_dtype) {
  if (num_q_heads == 0 || c.num_kv_heads == 0 || num_q_heads % c.num_kv_heads)
    fail("num_q_heads = " + std::to_string(num_q_heads) + " is not divisible by the cache's num_kv_heads = " +
         std::to_string(c.num_kv_heads) + " (GQA needs a whole number of q heads per kv head)");
  if (num_q_heads / c.num_kv_heads > 256)
    fail("num_q_heads / num_kv_heads = " + std::to_string(num_q_heads / c.num_kv_heads) + " is not supported: expected at most 256");
  if (q_dtype != DType::f16 && q_dtype != DType::bf16)
    fail("q dtype " + dtype_text(q_dtype) + " is not supported: expected f16 or bf16");
  if (c.head_size < 16 || c.head_size > 256 || c.head_size % 16)
    fail("the cache's head_size = " + std::to_string(c.head_size) + " is not supported: expected a multiple of 16 up to 256");
  // The rest of the geometry the kernels are specialised for (a plan and
  // prepare take a KvCacheConfig alone, before or without any cache).
  check_cache_geometry("paged_attention: the cache's ", c);
}

void check_options(const PagedAttentionPlanOptions& o) {
  if (o.split != SplitKv::automatic && o.split != SplitKv::off && o.split != SplitKv::on)
    fail("options.split = SplitKv(" + std::to_string(static_cast<uint32_t>(o.split)) +
         ") is not supported: expected automatic, off or on");
  if (o.prefill != PrefillKernel::automatic && o.prefill != PrefillKernel::off && o.prefill != PrefillKernel::on)
    fail("options.prefill = PrefillKernel(" + std::to_string(static_cast<uint32_t>(o.prefill)) +
         ") is not supported: expected automatic, off or on");
}

static_assert(kPagedAttentionWorkspaceCounterBytes == 4ull * PA_SPLIT_COUNTER_WORDS, "the header's counter bytes are the ABI's");

// The lengths' sizes and order; returns the longest query.
uint32_t check_lengths(const PagedAttentionLengths& b) {
  const size_t n = b.seq_lens.size();
  if (b.query_start_loc.size() != n + 1)
    fail("query_start_loc has " + std::to_string(b.query_start_loc.size()) + " entries, expected num_seqs + 1 = " + std::to_string(n + 1));
  if (b.query_start_loc[0] != 0) fail("query_start_loc[0] = " + std::to_string(b.query_start_loc[0]) + ", expected 0");
  int32_t longest = 0;
  for (size_t s = 0; s < n; ++s) {
    const int32_t q0 = b.query_start_loc[s], q1 = b.query_start_loc[s + 1], len = b.seq_lens[s];
    if (q1 < q0)
      fail("query_start_loc is decreasing at " + std::to_string(s + 1) + " (" + std::to_string(q0) + " then " + std::to_string(q1) + ")");
    if (len < 0) fail("seq_lens[" + std::to_string(s) + "] = " + std::to_string(len) + ", expected >= 0");
    if (len > 0 && q1 - q0 > len)
      fail("query_len of sequence " + std::to_string(s) + " = " + std::to_string(q1 - q0) + " exceeds seq_lens[" +
           std::to_string(s) + "] = " + std::to_string(len) + " (seq_len counts the new tokens too)");
    longest = std::max(longest, q1 - q0);
  }
  return static_cast<uint32_t>(longest);
}

// Pipelines: one attention kernel per (tile, layer variant), one reduce per variant.
abi::PagedAttentionSpec main_spec(const PagedAttentionPlanData& p, uint32_t bm, uint32_t tile_rows, uint32_t bn,
                                  uint32_t workgroup, bool one_tile_per_seq, bool single_token_rows,
                                  const PagedAttentionVariant& v, uint32_t subgroup_size, bool pack_o = false) {
  abi::PagedAttentionSpec spec;
  spec.PA_HEAD_SIZE = p.cache.head_size;
  spec.PA_BLOCK_SIZE = p.cache.block_size;
  spec.PA_NUM_KV_HEADS = p.cache.num_kv_heads;
  spec.PA_GQA = p.num_q_heads / p.cache.num_kv_heads;
  spec.PA_BM = bm;
  spec.PA_TILE_ROWS = tile_rows;
  spec.PA_BN = bn;
  spec.PA_WORKGROUP_SIZE = workgroup;
  spec.PA_CACHE_DTYPE = static_cast<uint32_t>(p.cache.dtype);
  spec.PA_LAYOUT = static_cast<uint32_t>(p.cache.layout);
  spec.PA_Q_DTYPE = static_cast<uint32_t>(p.q_dtype);
  spec.PA_OUT_DTYPE = static_cast<uint32_t>(v.out_dtype);
  spec.PA_HAS_ALIBI = v.alibi;
  spec.PA_HAS_SINKS = v.sinks;
  spec.PA_HAS_QQ_BIAS = v.qq_bias;
  spec.PA_HAS_SOFTCAP = v.softcap;
  spec.PA_HAS_WINDOW = v.sliding_window;
  spec.PA_WRITE_LSE = v.lse;
  spec.PA_SUBGROUP_SIZE = subgroup_size;
  spec.PA_ONE_TILE_PER_SEQ = one_tile_per_seq;
  spec.PA_SINGLE_TOKEN_ROWS = single_token_rows;
  spec.PA_KV_SUFFIX = p.suffix;
  spec.PA_PACK_O = pack_o;
  spec.PA_REGISTER_MATRICES = p.register_matrices && !pack_o;   // (the kernel's REGISTER_MATRICES excludes packed O)
  return spec;
}

// The decode kernel's and the prefill kernel's specialisations for a plan.
abi::PagedAttentionSpec decode_spec(const PagedAttentionPlanData& p, const PagedAttentionVariant& v, uint32_t subgroup_size) {
  const auto& sch = p.schedule;
  auto spec = main_spec(p, sch.bm, sch.tile_rows, sch.bn, sch.workgroup, sch.one_tile_per_seq, p.max_query_len <= 1, v,
                        subgroup_size, sch.pack_o);
  spec.PA_STAGE_HALVES = sch.stage_halves;
  return spec;
}
abi::PagedAttentionSpec prefill_spec(const PagedAttentionPlanData& p, const PrefillSchedule& pre, const PagedAttentionVariant& v) {
  return main_spec(p, pre.bm, pre.bm, pre.bn, pre.workgroup, false, false, v, 32);
}
// One of prefix prefill's two passes on the prefill kernel (PA_PREFIX_PASS):
// the context's on the paged op's module, the new tokens' on prefix prefill's.
abi::PagedAttentionSpec prefill_pass_spec(const PagedAttentionPlanData& p, const PrefillSchedule& pre,
                                          const PagedAttentionVariant& v, uint32_t pass) {
  auto spec = prefill_spec(p, pre, v);
  spec.PA_PREFIX_PASS = pass;
  if (pass == abi::PA_PASS_CONTEXT) spec.PA_KV_SUFFIX = 0;
  return spec;
}

const Pipeline& prefill_pipeline(ContextImpl& impl, Path path, abi::PagedAttentionSpec spec) {
  const bool bf16 = spec.PA_Q_DTYPE == static_cast<uint32_t>(DType::bf16);
  path = prefill_kernel_path(path, impl.caps.coopmat_register_order);
  // The prefill kernel's softmax in registers where the Context found the
  // element order, as the schedule's tile assumed (ScheduleDevice::prefill_shared_softmax).
  spec.PA_REGISTER_MATRICES = impl.caps.coopmat_register_order;
  return impl.pipelines->get({bf16 ? "paged_prefill_bf16" : "paged_prefill", path, spec_words(spec), abi::PA_BINDINGS,
                              sizeof(abi::PagedAttentionPush), 32});
}

const Pipeline& main_pipeline(ContextImpl& impl, Path path, const abi::PagedAttentionSpec& spec) {
  // The matrix kernel maps rows to lanes for one subgroup size, and has a
  // module for each element type, and the split cache layout modules of its
  // own (PA_SPLIT_MODULE).
  const uint32_t sg = path == Path::scalar ? 0 : spec.PA_SUBGROUP_SIZE;
  const bool bf16 = path != Path::scalar && spec.PA_Q_DTYPE == static_cast<uint32_t>(DType::bf16);
  const bool split = path != Path::scalar && spec.PA_LAYOUT == static_cast<uint32_t>(KvLayout::split);
  const std::string_view kernel = split ? (bf16 ? "paged_attention_split_bf16" : "paged_attention_split")
                                        : (bf16 ? "paged_attention_bf16" : kOp);
  return impl.pipelines->get({kernel, path, spec_words(spec), abi::PA_BINDINGS, sizeof(abi::PagedAttentionPush), sg});
}

abi::PagedAttentionReduceSpec reduce_spec(const PagedAttentionPlanData& p, const PagedAttentionVariant& v, uint32_t segments) {
  abi::PagedAttentionReduceSpec r;
  r.PR_HEAD_SIZE = p.cache.head_size;
  r.PR_OUT_DTYPE = static_cast<uint32_t>(v.out_dtype);
  r.PR_HAS_SINKS = v.sinks;
  r.PR_WRITE_LSE = v.lse;
  r.PR_ROW_PARALLEL = segments <= PR_ROW_PARALLEL_MAX_SEGMENTS;
  r.PR_WORKGROUP_SIZE = r.PR_ROW_PARALLEL || p.cache.head_size >= 128 ? 128 : 64;
  r.PR_NUM_Q_HEADS = p.num_q_heads;
  r.PR_GQA = p.num_q_heads / p.cache.num_kv_heads;
  return r;
}

const Pipeline& reduce_pipeline(ContextImpl& impl, const abi::PagedAttentionReduceSpec& spec) {
  return impl.pipelines->get({"paged_attention_reduce", Path::scalar, spec_words(spec), abi::PA_BINDINGS,
                              sizeof(abi::PagedAttentionPush)});
}

// The check of the lengths the device holds (paged_attention_check.comp).
const Pipeline& check_pipeline(ContextImpl& impl, const PagedAttentionPlanData& p, uint32_t bm, bool one_tile_per_seq) {
  abi::PagedAttentionCheckSpec c;
  c.PC_GQA = p.num_q_heads / p.cache.num_kv_heads;
  c.PC_BM = bm;
  c.PC_BLOCK_SIZE = p.cache.block_size;
  c.PC_ONE_TILE_PER_SEQ = one_tile_per_seq;
  return impl.pipelines->get({"paged_attention_check", Path::scalar, spec_words(c), abi::PA_BINDINGS,
                              sizeof(abi::PagedAttentionPush)});
}

void check_variant(const PagedAttentionVariant& v) {
  switch (v.out_dtype) {
    case DType::f16: case DType::bf16: case DType::f32: case DType::fp8_e4m3: case DType::fp8_e5m2: return;
    default: fail("out dtype " + dtype_text(v.out_dtype) + " is not supported: expected f16, bf16, f32, fp8_e4m3 or fp8_e5m2");
  }
}

// Whether the decode kernel's module for this cache reads 16 fp8 values per
// load at head size 128 (the kernel's WIDE pieces, HALVES): the modules that
// stage fp8 tiles in halves where the plan asks (PA_STAGE_HALVES; in the bf16
// modules, not with packed O), at the head size where that was measured, and
// that can build K/V matrices in registers instead (register_matrices).
bool half_staging_module(const PagedAttentionPlanData& p) {
  return is_fp8(p.cache.dtype) && p.cache.layout != KvLayout::split && p.cache.head_size == 128 && !p.suffix;
}

// Whether the decode kernel's module for this cache stages half of the head
// at a time at head size 256, where the plan asks (PA_STAGE_HALVES,
// workgroups of 4; not the split layout's module nor prefix prefill's): 16-bit
// caches each half loaded two halves ahead (the kernel's HEAD_HALVES), fp8
// ones as at head size 128 (STAGE_HALVES). Whole tiles of 256 dims hold an
// SM to one workgroup of 4.
bool head_halves_module(const PagedAttentionPlanData& p) {
  return p.cache.layout != KvLayout::split && p.cache.head_size == 256 && !p.suffix;
}

// Whether the decode kernel builds this plan's K/V matrices in registers
// (paged_attention_subgroup.comp, REGISTER_MATRICES), on a device whose
// matrix element order it knows.
bool register_matrices(const Context& ctx, const PagedAttentionPlanData& p) {
  return p.path != Path::scalar && ctx.impl().caps.coopmat_register_order && half_staging_module(p);
}

// Fills the parts of a plan that every constructor shares.
void finish_plan(Context& ctx, PagedAttentionPlanData& p, const ScheduleProblem& problem) {
  p.context_id = ctx.id();
  p.path = choose_path(ctx, p.q_dtype, p.cache.dtype);
  p.register_matrices = register_matrices(ctx, p);
  ScheduleProblem sp = problem;
  sp.registers_hold_two = registers_hold_two(p);
  sp.head_halves = p.path != Path::scalar && head_halves_module(p);
  p.schedule = schedule_paged_attention(schedule_device(ctx, p.path, p.q_dtype), sp);
}

ScheduleProblem problem_of(const PagedAttentionPlanData& p, const PagedAttentionPlanOptions& o) {
  ScheduleProblem s;
  s.num_q_heads = p.num_q_heads;
  s.num_kv_heads = p.cache.num_kv_heads;
  s.head_size = p.cache.head_size;
  s.num_seqs = p.num_seqs;
  s.num_tokens = p.num_tokens;
  s.max_query_len = p.max_query_len;
  s.split = o.split;
  s.prefill = o.prefill;
  s.num_segments = o.num_segments;
  s.workspace_bytes = o.workspace_bytes;
  s.half_staging_wave = half_staging_module(p) ? half_staging_wave(p.q_dtype) : 0.0f;
  return s;
}

}  // namespace

PagedAttentionPlan::PagedAttentionPlan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                                       const PagedAttentionLengths& lengths, const PagedAttentionPlanOptions& options) {
  check_shapes(cache, num_q_heads, q_dtype);
  check_options(options);
  auto& p = make_data();
  p.cache = cache;
  p.num_q_heads = num_q_heads;
  p.q_dtype = q_dtype;
  p.max_query_len = check_lengths(lengths);
  p.num_seqs = static_cast<uint32_t>(lengths.seq_lens.size());
  p.num_tokens = static_cast<uint32_t>(lengths.query_start_loc.back());
  ScheduleProblem problem = problem_of(p, options);
  problem.query_start_loc = lengths.query_start_loc;
  problem.seq_lens = lengths.seq_lens;
  finish_plan(ctx, p, problem);
}

PagedAttentionPlan::PagedAttentionPlan(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                                       const PagedAttentionLimits& limits, const PagedAttentionPlanOptions& options) {
  check_shapes(cache, num_q_heads, q_dtype);
  check_options(options);
  if (limits.max_query_len > limits.max_num_tokens)
    fail("limits.max_query_len = " + std::to_string(limits.max_query_len) + " exceeds limits.max_num_tokens = " +
         std::to_string(limits.max_num_tokens));
  for (auto [name, value] : {std::pair{"num_seqs", limits.num_seqs}, std::pair{"max_num_tokens", limits.max_num_tokens}})
    if (value > (1u << 30))
      fail(std::string("limits.") + name + " = " + std::to_string(value) + " is not supported: expected at most 2^30");
  auto& p = make_data();
  p.cache = cache;
  p.num_q_heads = num_q_heads;
  p.q_dtype = q_dtype;
  p.replay = true;
  p.num_seqs = limits.num_seqs;
  p.num_tokens = limits.max_num_tokens;
  p.max_query_len = limits.max_query_len ? limits.max_query_len : limits.max_num_tokens;
  ScheduleProblem problem = problem_of(p, options);
  problem.max_seq_len = limits.max_seq_len;
  finish_plan(ctx, p, problem);
}

// The plan's data lives in the object (kDataBytes, declared where the type
// is incomplete), so that a plan made every step allocates nothing.
PagedAttentionPlanData& PagedAttentionPlan::make_data() {
  static_assert(sizeof(PagedAttentionPlanData) <= kDataBytes && alignof(PagedAttentionPlanData) <= kDataAlign,
                "PagedAttentionPlan::kDataBytes no longer holds the plan's data: raise it");
  static_assert(std::is_trivially_copyable_v<PagedAttentionPlanData>, "the plan's data is copied and moved as a value");
  drop_data();
  auto* p = new (data_) PagedAttentionPlanData();
  has_data_ = true;
  return *p;
}
void PagedAttentionPlan::drop_data() noexcept {
  if (has_data_) std::launder(reinterpret_cast<PagedAttentionPlanData*>(data_))->~PagedAttentionPlanData();
  has_data_ = false;
}
PagedAttentionPlan::~PagedAttentionPlan() { drop_data(); }
PagedAttentionPlanData& PagedAttentionPlan::mutable_data() { return const_cast<PagedAttentionPlanData&>(std::as_const(*this).data()); }
const PagedAttentionPlanData& PagedAttentionPlan::data() const {
  if (!has_data_) throw Error("this plan was moved from (a PagedAttentionPlan, or the PrefixPrefillPlan that holds one): use the plan it was moved to");
  return *std::launder(reinterpret_cast<const PagedAttentionPlanData*>(data_));
}
PagedAttentionPlan::PagedAttentionPlan(const PagedAttentionPlan& o) { make_data() = o.data(); }
PagedAttentionPlan& PagedAttentionPlan::operator=(const PagedAttentionPlan& o) {
  if (this != &o) {
    const PagedAttentionPlanData copy = o.data();   // throws for a plan moved from, leaving this one as it was
    make_data() = copy;
  }
  return *this;
}
// A move copies the data and leaves the source moved from (it throws on use).
PagedAttentionPlan::PagedAttentionPlan(PagedAttentionPlan&& o) noexcept { *this = std::move(o); }
PagedAttentionPlan& PagedAttentionPlan::operator=(PagedAttentionPlan&& o) noexcept {
  if (this == &o) return *this;
  drop_data();
  if (o.has_data_) {
    make_data() = o.data();
    o.drop_data();
  }
  return *this;
}
uint32_t PagedAttentionPlan::num_tokens() const { return data().num_tokens; }
uint32_t PagedAttentionPlan::num_seqs() const { return data().num_seqs; }
uint32_t PagedAttentionPlan::max_query_len() const { return data().max_query_len; }
uint32_t PagedAttentionPlan::num_q_heads() const { return data().num_q_heads; }
uint32_t PagedAttentionPlan::head_size() const { return data().cache.head_size; }
bool PagedAttentionPlan::split() const { return data().schedule.split; }
uint32_t PagedAttentionPlan::num_segments() const { return data().schedule.num_segments; }
uint64_t PagedAttentionPlan::workspace_bytes() const { return data().schedule.workspace_bytes; }
uint64_t PagedAttentionPlan::num_workgroups() const { return data().schedule.num_workgroups + data().schedule.prefill.num_workgroups; }
bool PagedAttentionPlan::routes_prefill() const { return data().schedule.prefill.on; }
uint32_t PagedAttentionPlan::prefill_min_rows() const { return data().schedule.prefill.min_rows; }
uint32_t PagedAttentionPlan::workgroup_size() const { return data().schedule.workgroup; }
Path PagedAttentionPlan::path() const { return data().path; }

void PagedAttentionPlan::prepare(Context& ctx, std::span<const PagedAttentionVariant> variants) const {
  const auto& p = data();
  auto& impl = ctx.impl();
  if (p.context_id != impl.id) fail("the plan was made for another Context");
  for (const auto& v : variants) check_variant(v);   // before any pipeline is compiled
  check_pipeline(impl, p, p.schedule.bm, p.schedule.one_tile_per_seq && !p.schedule.prefill.on);
  for (const auto& v : variants) {
    if (p.schedule.num_workgroups) main_pipeline(impl, p.path, decode_spec(p, v, impl.caps.subgroup_size));
    if (p.schedule.prefill.on && p.schedule.prefill.passes) {
      for (uint32_t pass : {abi::PA_PASS_CONTEXT, abi::PA_PASS_NEW_TOKENS})
        prefill_pipeline(impl, p.path, prefill_pass_spec(p, p.schedule.prefill, v, pass));
    } else if (p.schedule.prefill.on) {
      prefill_pipeline(impl, p.path, prefill_spec(p, p.schedule.prefill, v));
    }
    if (p.schedule.split) reduce_pipeline(impl, reduce_spec(p, v, p.schedule.num_segments));
  }
}

void prepare_paged_attention(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                             std::span<const PagedAttentionVariant> variants) {
  prepare_attention_pipelines(ctx, cache, num_q_heads, q_dtype, variants, false);
}

void detail::prepare_attention_pipelines(Context& ctx, const KvCacheConfig& cache, uint32_t num_q_heads, DType q_dtype,
                                         std::span<const PagedAttentionVariant> variants, bool suffix) {
  check_shapes(cache, num_q_heads, q_dtype);
  for (const auto& v : variants) check_variant(v);   // before any pipeline is compiled
  auto& impl = ctx.impl();
  PagedAttentionPlanData p;
  p.cache = cache;
  p.num_q_heads = num_q_heads;
  p.q_dtype = q_dtype;
  p.suffix = suffix;
  p.path = choose_path(ctx, q_dtype, cache.dtype);
  p.register_matrices = register_matrices(ctx, p);
  const ScheduleDevice dev = schedule_device(ctx, p.path, q_dtype);
  // Every tile a batch may get (by its longest query's rows: none, one
  // decode token's GQA heads, or more), and on the matrix paths every
  // workgroup size the schedule may give it (detail::matrix_subgroup_choices).
  const uint32_t gqa = num_q_heads / cache.num_kv_heads;
  std::vector<Tile> tiles;
  for (uint32_t rows : {0u, gqa, 2u, 4u, 8u, 16u, 32u}) {
    if (rows && rows < gqa) continue;
    const Tile t = choose_tile(dev, cache.head_size, rows);
    std::vector<uint32_t> sizes{t.workgroup};
    if (p.path != Path::scalar) {
      sizes.clear();
      for (uint32_t n : matrix_subgroup_choices(t.workgroup / dev.subgroup_size)) sizes.push_back(n * dev.subgroup_size);
    }
    for (uint32_t w : sizes)
      if (std::none_of(tiles.begin(), tiles.end(),
                       [&](const Tile& u) { return u.bm == t.bm && u.bn == t.bn && u.workgroup == w && u.rows == t.rows; }))
        tiles.push_back({t.bm, t.bn, w, t.rows});
  }
  for (const Tile& t : tiles)
    for (bool one_tile : {true, false}) check_pipeline(impl, p, t.bm, one_tile);
  for (const auto& v : variants) {
    for (const Tile& t : tiles)
      for (bool one_tile : {true, false})
        for (bool single_token : {true, false})
          for (bool pack : {false, true}) {   // packed O: bf16 batches of at most one item per SM (pack_slices)
            if (pack && !packed_slices_fit(dev, cache.head_size, t.bm, t.rows, t.workgroup / dev.subgroup_size)) continue;
            auto spec = main_spec(p, t.bm, t.rows, t.bn, t.workgroup, one_tile, single_token, v, impl.caps.subgroup_size, pack);
            main_pipeline(impl, p.path, spec);
            // Half-tile staging: many items in 4-subgroup workgroups (Schedule::stage_halves).
            if (!pack && p.path != Path::scalar && (half_staging_module(p) || head_halves_module(p)) &&
                t.workgroup == 4 * dev.subgroup_size) {
              spec.PA_STAGE_HALVES = 1;
              main_pipeline(impl, p.path, spec);
            }
          }
    for (uint32_t segments : {2u, PR_ROW_PARALLEL_MAX_SEGMENTS + 1}) reduce_pipeline(impl, reduce_spec(p, v, segments));
  }
  // The prefill kernel, where a plan may route sequences to it. Which rows
  // are whose is a push constant, so the decode kernel's sequences run on the
  // pipelines above.
  const Tile pre = dev.prefill_kernel ? prefill_tile(dev, cache.head_size) : Tile{0, 0, 0};
  if (!pre.bm) return;
  const PrefillSchedule routed{true, pre.bm, pre.bn, pre.workgroup};
  for (const auto& v : variants) {
    if (!suffix) {
      prefill_pipeline(impl, p.path, prefill_spec(p, routed, v));
      continue;
    }
    for (uint32_t pass : {abi::PA_PASS_CONTEXT, abi::PA_PASS_NEW_TOKENS})   // prefix_prefill_passes
      prefill_pipeline(impl, p.path, prefill_pass_spec(p, routed, v, pass));
  }
}

namespace {

void check_params(const PagedAttentionParams& o, uint32_t num_q_heads, uint32_t max_query_len) {
  if (!(o.scale > 0) || !std::isfinite(o.scale)) fail("scale = " + std::to_string(o.scale) + ", expected a finite value > 0");
  if (o.sliding_window < 0) fail("sliding_window = " + std::to_string(o.sliding_window) + ", expected 0 (none) or > 0");
  if (!(o.softcap >= 0) || !std::isfinite(o.softcap)) fail("softcap = " + std::to_string(o.softcap) + ", expected 0 (none) or > 0");
  check_reciprocal_scale("paged_attention: ", "out_scale", o.out_scale);   // fp8 outputs store out * (1 / out_scale)
  const int64_t H = num_q_heads;
  if (o.alibi_slopes) {
    check_view(kOp, "alibi_slopes", *o.alibi_slopes, {DType::f32}, {H}, {"num_q_heads"});
    check_strides(kOp, "alibi_slopes", *o.alibi_slopes);
  }
  if (o.sinks) {
    check_view(kOp, "sinks", *o.sinks, {DType::f32}, {H}, {"num_q_heads"});
    check_strides(kOp, "sinks", *o.sinks);
  }
  if (o.qq_bias) {
    check_view(kOp, "qq_bias", *o.qq_bias, {DType::f32}, {-1, -1}, {"rows", "columns"});
    check_strides(kOp, "qq_bias", *o.qq_bias);
    if (o.qq_bias->shape[0] < int64_t(max_query_len))
      fail("qq_bias has " + std::to_string(o.qq_bias->shape[0]) + " rows, expected at least the plan's longest query_len = " +
           std::to_string(max_query_len));
  }
}

}  // namespace

void paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache, const PagedAttentionArgs& a,
                     VkCommandBuffer cmd) {
  if (plan.data().suffix) fail("the plan is a PrefixPrefillPlan's: run it with prefix_prefill");
  record_paged_attention(ctx, plan, cache, a, nullptr, cmd);
}

template <class Args>
void detail::record_paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache, const Args& a,
                                    const SuffixKv* suffix, VkCommandBuffer cmd) {
  auto& impl = ctx.impl();
  impl.check_usable(kOp);
  const auto& p = plan.data();
  const auto& sch = p.schedule;
  if (p.context_id != impl.id) fail("the plan was made for another Context");
  if (p.suffix != (suffix != nullptr)) fail("a prefix-prefill plan runs with prefix_prefill only");
  if (cache.context_id() != impl.id)
    fail(cache.context_id() ? "the cache belongs to another Context" : "the cache was moved from: use the cache it was moved to");
  const auto& c = cache.config();
  if (c.block_size != p.cache.block_size || c.num_kv_heads != p.cache.num_kv_heads || c.head_size != p.cache.head_size ||
      c.dtype != p.cache.dtype || c.layout != p.cache.layout)
    fail("the cache differs from the one the plan was made for (block size, kv heads, head size, dtype or layout)");
  const int64_t T = p.num_tokens, H = p.num_q_heads, D = c.head_size, S = p.num_seqs;
  check_view(kOp, "q", a.q, {p.q_dtype}, {T, H, D}, {"num_tokens", "num_q_heads", "head_size"});
  check_view(kOp, "out", a.out, {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2}, {T, H, D},
             {"num_tokens", "num_q_heads", "head_size"});
  check_strides(kOp, "q", a.q);
  check_strides(kOp, "out", a.out);
  check_distinct_elements(kOp, "out", a.out);
  if (a.lse) {
    check_view(kOp, "lse", *a.lse, {DType::f32}, {T, H}, {"num_tokens", "num_q_heads"});
    check_strides(kOp, "lse", *a.lse);
    check_distinct_elements(kOp, "lse", *a.lse);
  }
  const auto& b = a.batch;
  check_view(kOp, "query_start_loc", b.query_start_loc, {DType::i32}, {S + 1}, {"num_seqs + 1"});
  check_view(kOp, "seq_lens", b.seq_lens, {DType::i32}, {S}, {"num_seqs"});
  check_view(kOp, "block_table", b.block_table, {DType::i32}, {S, -1}, {"num_seqs", "max_blocks_per_seq"});
  check_strides(kOp, "query_start_loc", b.query_start_loc);
  check_strides(kOp, "seq_lens", b.seq_lens);
  check_strides(kOp, "block_table", b.block_table);
  if (b.block_table.shape[1] < 1) fail("block_table has 0 columns, expected max_blocks_per_seq >= 1");
  check_params(a.params, p.num_q_heads, p.max_query_len);
  if (a.workspace) {
    check_view(kOp, "workspace", *a.workspace, {DType::f32}, {-1}, {"floats"});
    check_strides(kOp, "workspace", *a.workspace);
    if (uint64_t(a.workspace->shape[0]) * 4 < sch.workspace_bytes)
      fail("the workspace holds " + std::to_string(a.workspace->shape[0] * 4) + " bytes, expected at least the plan's " +
           std::to_string(sch.workspace_bytes));
  } else if (sch.split && sch.workspace_bytes > 0) {   // (none for a plan of no tokens)
    fail("this plan splits the KV range into " + std::to_string(sch.num_segments) + " segments: pass a workspace (f32) of at least " +
         std::to_string(sch.workspace_bytes) + " bytes (PagedAttentionArgs::workspace)");
  }
  const TensorView* ws = sch.split && a.workspace ? &*a.workspace : nullptr;
  const NamedView outputs[] = {{&a.out, "out"}, {a.lse ? &*a.lse : nullptr, "lse"}, {ws, "workspace"}};
  const NamedView inputs[] = {{&a.q, "q"}, {&b.query_start_loc, "query_start_loc"}, {&b.seq_lens, "seq_lens"},
                              {&b.block_table, "block_table"},
                              {a.params.alibi_slopes ? &*a.params.alibi_slopes : nullptr, "alibi_slopes"},
                              {a.params.sinks ? &*a.params.sinks : nullptr, "sinks"},
                              {a.params.qq_bias ? &*a.params.qq_bias : nullptr, "qq_bias"}};
  check_apart(kOp, outputs, inputs);
  check_apart_from_cache(kOp, outputs, cache, "an output must not share memory with the cache it reads");
  if (suffix && suffix->writes_cache)
    check_apart_from_cache(kOp, inputs, cache, "an input must not share memory with the cache that slot_mapping writes");
  if (!cmd) fail("the command buffer is VK_NULL_HANDLE");

  // Bindings, and each view's element offset inside its own (bind_view
  // checks each view's buffer, Context and bounds: also when there is
  // nothing to dispatch).
  BufferBinding bindings[abi::PA_BINDINGS - 1];
  uint32_t offsets[3] = {0, 0, 0};
  auto bind = [&](uint32_t binding, uint32_t view, const TensorView* v, const char* name) {
    BufferBinding& to = bindings[binding - 1];
    if (!v) {
      to = placeholder_binding(impl);
      return;
    }
    const BoundView bv = bind_view(impl, *v, kOp, name);
    to = bv.binding;
    offsets[view / 4] |= bv.element_offset << (8 * (view % 4));
  };
  bind(abi::PA_BINDING_Q, abi::PA_VIEW_Q, &a.q, "q");
  bind(abi::PA_BINDING_OUT, abi::PA_VIEW_OUT, &a.out, "out");
  bind(abi::PA_BINDING_LSE, abi::PA_VIEW_LSE, a.lse ? &*a.lse : nullptr, "lse");
  bind(abi::PA_BINDING_QUERY_START_LOC, abi::PA_VIEW_QUERY_START_LOC, &b.query_start_loc, "query_start_loc");
  bind(abi::PA_BINDING_SEQ_LENS, abi::PA_VIEW_SEQ_LENS, &b.seq_lens, "seq_lens");
  bind(abi::PA_BINDING_BLOCK_TABLE, abi::PA_VIEW_BLOCK_TABLE, &b.block_table, "block_table");
  bind(abi::PA_BINDING_ALIBI, abi::PA_VIEW_ALIBI, a.params.alibi_slopes ? &*a.params.alibi_slopes : nullptr, "alibi_slopes");
  bind(abi::PA_BINDING_SINKS, abi::PA_VIEW_SINKS, a.params.sinks ? &*a.params.sinks : nullptr, "sinks");
  bind(abi::PA_BINDING_QQ_BIAS, abi::PA_VIEW_QQ_BIAS, a.params.qq_bias ? &*a.params.qq_bias : nullptr, "qq_bias");
  bind(abi::PA_BINDING_WORKSPACE, abi::PA_VIEW_WORKSPACE, ws, "workspace");
  bind(abi::PA_BINDING_NEW_K, abi::PA_VIEW_NEW_K, suffix ? suffix->key : nullptr, "key");
  bind(abi::PA_BINDING_NEW_V, abi::PA_VIEW_NEW_V, suffix ? suffix->value : nullptr, "value");
  if (T == 0 || (sch.num_workgroups == 0 && !sch.prefill.on)) return;

  const PagedAttentionParams& o = a.params;
  abi::PagedAttentionPush push{};
  push.chunk_table_address = cache.chunk_table_address();
  push.flags = sch.split ? abi::PA_FLAG_SPLIT : 0;
  if (sch.merge_last) push.flags |= abi::PA_FLAG_MERGE_LAST;
  push.num_seqs = p.num_seqs;
  push.num_tokens = p.num_tokens;
  push.num_segments = sch.num_segments;
  push.q_token_stride = to_u32(kOp, "q stride 0", a.q.stride(0));
  push.q_head_stride = to_u32(kOp, "q stride 1", a.q.stride(1));
  push.out_token_stride = to_u32(kOp, "out stride 0", a.out.stride(0));
  push.out_head_stride = to_u32(kOp, "out stride 1", a.out.stride(1));
  push.lse_token_stride = a.lse ? to_u32(kOp, "lse stride 0", a.lse->stride(0)) : 0;
  push.block_table_stride = to_u32(kOp, "block_table stride 0", b.block_table.stride(0));
  push.max_blocks_per_seq = to_u32(kOp, "max_blocks_per_seq", b.block_table.shape[1]);
  push.num_blocks = c.num_blocks;
  push.blocks_per_chunk = cache.blocks_per_chunk();
  push.chunk_magic = abi::vka_kv_chunk_magic(cache.blocks_per_chunk());
  push.num_k_chunks = cache.num_chunks();
  if (o.qq_bias) {
    push.qq_bias_stride = to_u32(kOp, "qq_bias stride 0", o.qq_bias->stride(0));
    push.qq_bias_rows = to_u32(kOp, "qq_bias rows", o.qq_bias->shape[0]);
    push.qq_bias_columns = to_u32(kOp, "qq_bias columns", o.qq_bias->shape[1]);
  }
  push.sliding_window = o.sliding_window;
  push.scale = o.scale;
  push.softcap = o.softcap;
  push.k_scale = c.k_scale;
  push.v_scale = c.v_scale;
  push.out_inv_scale = static_cast<float>(1.0 / o.out_scale);
  push.view_offsets0 = offsets[0];
  push.view_offsets1 = offsets[1];
  push.view_offsets2 = offsets[2];
  auto view_offset = [&](uint32_t view) { return (offsets[view / 4] >> (8 * (view % 4))) & 0xFFu; };
  push.route_rows = sch.prefill.on ? sch.prefill.min_rows : 0;
  // Prefix prefill: the prefill kernel's items run in two passes and write
  // their outputs (abi/paged_attention.h), and the reduce leaves them.
  const bool passes = suffix && sch.prefill.on && sch.prefill.passes;
  if (suffix) {
    const TensorView &k = *suffix->key, &v = *suffix->value;
    push.flags |= abi::PA_FLAG_SUFFIX | (suffix->skip_decode ? abi::PA_FLAG_SKIP_DECODE : 0) |
                  (passes ? abi::PA_FLAG_SUFFIX_PASSES : 0);
    push.PA_PUSH_NEW_K_TOKEN_STRIDE = to_u32(kOp, "key stride 0", k.stride(0));
    push.PA_PUSH_NEW_V_TOKEN_STRIDE = to_u32(kOp, "value stride 0", v.stride(0));
    push.PA_PUSH_NEW_KV_HEAD_STRIDES = uint32_t(k.stride(1)) | uint32_t(v.stride(1)) << 16;   // < 2^16: prefix_prefill checks
    const bool wide = rows_of_8_on_words(view_offset(abi::PA_VIEW_NEW_K), {k.stride(0), k.stride(1)}) &&
                      rows_of_8_on_words(view_offset(abi::PA_VIEW_NEW_V), {v.stride(0), v.stride(1)});
    if (!wide) push.flags |= abi::PA_FLAG_SUFFIX_NARROW;
  }
  if (rows_of_8_on_words(view_offset(abi::PA_VIEW_Q), {a.q.stride(0), a.q.stride(1)})) push.flags |= abi::PA_FLAG_Q_WIDE;
  if (rows_of_8_on_words(view_offset(abi::PA_VIEW_OUT), {a.out.stride(0), a.out.stride(1)})) push.flags |= abi::PA_FLAG_OUT_WIDE;

  PagedAttentionVariant v;
  v.alibi = o.alibi_slopes.has_value();
  v.sinks = o.sinks.has_value();
  v.qq_bias = o.qq_bias.has_value();
  v.softcap = o.softcap > 0;
  v.sliding_window = o.sliding_window > 0;
  v.lse = a.lse.has_value();
  v.out_dtype = a.out.dtype;
  const Pipeline* main = sch.num_workgroups ? &main_pipeline(impl, p.path, decode_spec(p, v, impl.caps.subgroup_size)) : nullptr;
  const Pipeline* prefill =
      !sch.prefill.on ? nullptr
      : passes        ? &prefill_pipeline(impl, p.path, prefill_pass_spec(p, sch.prefill, v, abi::PA_PASS_CONTEXT))
                      : &prefill_pipeline(impl, p.path, prefill_spec(p, sch.prefill, v));
  const Pipeline* new_tokens =
      passes ? &prefill_pipeline(impl, p.path, prefill_pass_spec(p, sch.prefill, v, abi::PA_PASS_NEW_TOKENS)) : nullptr;
  // The workspace may be shared with an earlier run on this queue, whose
  // reduce may still be reading it.
  if (sch.split) compute_barrier(impl, cmd);
  const ReportingOp op = suffix ? ReportingOp::prefix_prefill : ReportingOp::paged_attention;
  // The lengths' check runs beside the attention (both only read the batch;
  // no barrier between them): one invocation per sequence.
  const Pipeline& check = check_pipeline(impl, p, sch.bm, sch.one_tile_per_seq && !sch.prefill.on);
  const uint64_t check_workgroup = abi::PagedAttentionCheckSpec{}.PC_WORKGROUP_SIZE;
  const uint64_t check_workgroups = (uint64_t(p.num_seqs) + check_workgroup - 1) / check_workgroup;
  const Grid cgrid = fold_grid(impl, check_workgroups, kOp);
  push.num_workgroups = static_cast<uint32_t>(check_workgroups);
  push.grid_x = cgrid.x;
  record_dispatch(impl, cmd, check, bindings, &push, cgrid, op);
  // Every later dispatch differs from the check's only in its grid.
  const PushedBytes grid_words{offsetof(abi::PagedAttentionPush, num_workgroups), 2 * sizeof(uint32_t)};
  static_assert(offsetof(abi::PagedAttentionPush, grid_x) == offsetof(abi::PagedAttentionPush, num_workgroups) + 4);
  const Pipeline* previous = &check;
  // The prefill kernel's and the decode kernel's sequences are apart: both
  // run at once, the longer first.
  if (prefill) {
    const Grid pgrid = fold_grid(impl, sch.prefill.num_workgroups, kOp);
    push.num_workgroups = static_cast<uint32_t>(sch.prefill.num_workgroups);
    push.grid_x = pgrid.x;
    record_next_dispatch(impl, cmd, *previous, *prefill, bindings, &push, grid_words, pgrid, op);
    previous = prefill;
  }
  if (main) {
    const Grid grid = fold_grid(impl, sch.num_workgroups, kOp);
    push.num_workgroups = static_cast<uint32_t>(sch.num_workgroups);
    push.grid_x = grid.x;
    record_next_dispatch(impl, cmd, *previous, *main, bindings, &push, grid_words, grid, op);
    previous = main;
  }
  // Prefix prefill's new-token pass reads the context pass's partial results.
  if (new_tokens) {
    compute_barrier(impl, cmd);
    const Grid pgrid = fold_grid(impl, sch.prefill.num_workgroups, kOp);
    push.num_workgroups = static_cast<uint32_t>(sch.prefill.num_workgroups);
    push.grid_x = pgrid.x;
    record_next_dispatch(impl, cmd, *previous, *new_tokens, bindings, &push, grid_words, pgrid, op);
    previous = new_tokens;
  }
  // (Prefix prefill's passes with no decode-kernel items: nothing to merge.
  // With merge_last, the attention kernel merged.)
  if (!sch.split || (passes && !main) || sch.merge_last) return;

  compute_barrier(impl, cmd);
  const abi::PagedAttentionReduceSpec rspec = reduce_spec(p, v, sch.num_segments);
  const Pipeline& reduce = reduce_pipeline(impl, rspec);
  const uint64_t rows = uint64_t(T) * H;
  const uint64_t per_workgroup = rspec.PR_ROW_PARALLEL ? PR_ROWS_PER_WORKGROUP(rspec.PR_WORKGROUP_SIZE, rspec.PR_HEAD_SIZE) : 1;
  const Grid rgrid = fold_grid(impl, (rows + per_workgroup - 1) / per_workgroup, kOp);
  push.num_workgroups = static_cast<uint32_t>(rows);
  push.grid_x = rgrid.x;
  record_next_dispatch(impl, cmd, *previous, reduce, bindings, &push, grid_words, rgrid, op);
}

template void detail::record_paged_attention(Context&, const PagedAttentionPlan&, const PagedKvCache&,
                                             const PagedAttentionArgs&, const SuffixKv*, VkCommandBuffer);
template void detail::record_paged_attention(Context&, const PagedAttentionPlan&, const PagedKvCache&,
                                             const PrefixPrefillArgs&, const SuffixKv*, VkCommandBuffer);

void paged_attention(Context& ctx, const PagedAttentionPlan& plan, const PagedKvCache& cache, const PagedAttentionArgs& args) {
  run_paged_attention_now(ctx, plan, args, [&](const PagedAttentionArgs& a, VkCommandBuffer cmd) {
    paged_attention(ctx, plan, cache, a, cmd);
  });
}

void detail::run_paged_attention_now(Context& ctx, const PagedAttentionPlan& plan, const PagedAttentionArgs& args,
                                     const std::function<void(const PagedAttentionArgs&, VkCommandBuffer)>& record) {
  auto& impl = ctx.impl();
  const bool own = plan.split() && !args.workspace && plan.workspace_bytes() > 0;
  const uint64_t bytes = plan.workspace_bytes();
  submit_and_wait(
      impl,
      [&](VkCommandBuffer cmd) {
        if (!own) return record(args, cmd);
        // The Context's own workspace (under the submit lock), grown as needed.
        if (impl.sync_workspace.size < bytes) {
          release(impl, impl.sync_workspace);
          impl.sync_workspace_zeroed = false;
          impl.sync_workspace = allocate(impl, bytes, MemoryKind::device_local, "paged_attention workspace");
        }
        // Its arrival counters must be 0 (abi/paged_attention.h). They are
        // counted as such only once a run completes without a report (the
        // check below): a call that throws before its submission leaves
        // this fill unrun, and a reported run may leave a count behind.
        if (!impl.sync_workspace_zeroed) {
          impl.vk.vkCmdFillBuffer(cmd, impl.sync_workspace.buffer, 0, kPagedAttentionWorkspaceCounterBytes, 0u);
          transfer_to_compute_barrier(impl, cmd);
        }
        impl.sync_workspace_zeroed = false;
        // The plan's bytes, not the whole buffer: an earlier plan's larger
        // need must not make this one's view larger than the device binds.
        PagedAttentionArgs a = args;
        a.workspace = TensorView::contiguous({impl.sync_workspace.buffer, impl.sync_workspace.size, impl.id}, DType::f32,
                                             {int64_t(bytes / 4)});
        record(a, cmd);
      },
      [&] {
        throw_status(impl, StatusSlot::synchronous);
        if (own) impl.sync_workspace_zeroed = true;
      });
}

}  // namespace vkattn
