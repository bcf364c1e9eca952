// `vkattn bench serve`: the serving loop (tools/serve/serving_loop.hpp) as a
// benchmark. For each mode (planned every step, or replayed command buffers),
// batch size and kind of step (all decode, or decode with a chunk of prefill
// in every step), it reports what an engine would see: host microseconds per
// step (planning and recording), GPU microseconds per step, their overhead
// against `layers` times one layer's work recorded alone, and tokens per
// second. Every case is first checked against the float64 reference on a
// small loop of the same mode and kind.
#include "bench/serve_bench.hpp"

#include <vkattn/vkattn.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <regex>

#include "bench/bench_op.hpp"
#include "bench/ceilings.hpp"
#include "report/progress.hpp"
#include "serve/serving_loop.hpp"

namespace vkattn::tool {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

std::string fmt(double v, const char* f = "%.1f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// A small loop of the case's mode and kind, every step checked.
Verification verify_case(Context& ctx, const ServeConfig& big) {
  ServeConfig c = big;
  c.layers = 2;
  c.batch = std::min(big.batch, 3u);
  c.context = 300;
  c.prefill_chunk = big.prefill_chunk ? 37 : 0;
  c.steps = 4;
  c.random_values = true;
  c.fill_caches = true;
  c.submit = true;
  ServingLoop loop(ctx, c);
  Verification v{true, 0, 0, ""};
  for (int step = 0; step < 3 && v.pass; ++step) {
    loop.step();
    loop.finish();
    RunResult r = loop.verify(step % 2);
    v.pass = r.pass;
    v.failure = r.failure;
    v.max_abs_err = std::max(v.max_abs_err, r.max_abs_err);
    v.max_rel_err = std::max(v.max_rel_err, r.max_rel_err);
  }
  return v;
}

}  // namespace

std::vector<report::BenchCase> serve_cases(Context& ctx, const ServeOptions& o) {
  std::vector<report::BenchCase> results;
  const std::regex re(o.filter.empty() ? ".*" : o.filter);
  std::vector<std::pair<std::string, ServeConfig>> todo;
  for (bool replay : {false, true})
    for (int64_t b : o.batches)
      for (bool mixed : {false, true}) {
        ServeConfig c;
        c.layers = o.layers;
        c.num_q_heads = o.quick ? 8 : 32;
        c.num_kv_heads = o.quick ? 2 : 8;
        c.head_size = o.quick ? 64 : 128;
        c.batch = static_cast<uint32_t>(b);
        c.context = o.context;
        c.prefill_chunk = mixed ? o.prefill_chunk : 0;
        c.mixed_every = 1;
        c.replay = replay;
        c.steps = o.warmup_steps + o.steps + 1;
        c.fill_caches = c.gpu_timing = c.submit = !o.host_only;
        const std::string name = std::string(replay ? "replay" : "planned") + " B=" + std::to_string(b) +
                                 (mixed ? " +" + std::to_string(o.prefill_chunk) + " prefill" : " decode");
        if (std::regex_search(name, re)) todo.emplace_back(name, c);
      }
  report::Progress progress(todo.size(), "bench serve");
  for (auto& [name, c] : todo) {
    progress.step(name);
    report::BenchCase bc;
    bc.name = name;
    if (!o.host_only) {
      const Verification v = verify_case(ctx, c);
      bc.verified = v.pass;
      bc.max_abs_err = v.max_abs_err;
      bc.max_rel_err = v.max_rel_err;
      if (!v.pass) throw Error("bench serve: case '" + name + "' failed verification: " + v.failure);
    }
    ServingLoop loop(ctx, c);
    if (o.before_timing) o.before_timing();
    for (uint32_t i = 0; i < o.warmup_steps; ++i) loop.step();
    loop.finish();
    std::vector<double> host, plan, record, gpu;
    uint32_t tokens = 0;
    for (uint32_t i = 0; i < o.steps; ++i) {
      const StepTimes t = loop.step();
      tokens = t.tokens;
      host.push_back(t.host_us);
      plan.push_back(t.plan_us);
      record.push_back(t.record_us / c.layers);
      if (!o.host_only) gpu.push_back(loop.finish());
    }
    loop.finish();
    const double layer = o.host_only ? 0 : loop.layer_us(20);
    const double gpu_step = median(gpu);
    bc.samples_us = o.host_only ? host : gpu;
    bc.bound = o.host_only ? "host" : "memory";
    bc.bytes = o.host_only ? 0 : double(loop.kv_bytes_per_layer()) * c.layers;
    bc.params = {{"mode", c.replay ? "replay" : "planned"},
                 {"batch", std::to_string(c.batch)},
                 {"context", std::to_string(c.context)},
                 {"prefill_chunk", std::to_string(c.prefill_chunk)},
                 {"layers", std::to_string(c.layers)},
                 {"q_heads", std::to_string(c.num_q_heads)},
                 {"kv_heads", std::to_string(c.num_kv_heads)},
                 {"head_size", std::to_string(c.head_size)},
                 {"caches", std::to_string(loop.num_caches())},
                 {"tokens_per_step", std::to_string(tokens)},
                 {"host_us_per_step", fmt(median(host), "%.2f")},
                 {"plan_us", fmt(median(plan), "%.2f")},
                 {"record_us_per_layer", fmt(median(record), "%.2f")}};
    if (!o.host_only) {
      bc.params["gpu_us_per_step"] = fmt(gpu_step, "%.1f");
      bc.params["layer_us_alone"] = fmt(layer, "%.2f");
      bc.params["overhead_vs_layers"] = fmt(100.0 * (gpu_step / (layer * c.layers) - 1.0), "%.1f%%");
      bc.params["tokens_per_s"] = fmt(tokens / (gpu_step * 1e-6), "%.0f");
    }
    results.push_back(std::move(bc));
  }
  progress.finish();
  return results;
}

void write_serve_table(std::ostream& os, const std::vector<report::BenchCase>& cases, bool host_only) {
  auto p = [](const report::BenchCase& c, const char* k) {
    auto it = c.params.find(k);
    return it == c.params.end() ? std::string("-") : it->second;
  };
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %9s %9s %12s %12s %13s %10s %12s\n", "case", "host us", "plan us",
                "record/layer", "GPU us/step", "layers alone", "overhead", "tokens/s");
  os << "\n" << line;
  for (const auto& c : cases) {
    std::string alone = "-";
    if (!host_only) {
      const double layer = std::stod(p(c, "layer_us_alone")), layers = std::stod(p(c, "layers"));
      alone = fmt(layer * layers, "%.1f");
    }
    std::snprintf(line, sizeof line, "%-28s %9s %9s %12s %12s %13s %10s %12s\n", c.name.c_str(),
                  p(c, "host_us_per_step").c_str(), p(c, "plan_us").c_str(), p(c, "record_us_per_layer").c_str(),
                  p(c, "gpu_us_per_step").c_str(), alone.c_str(), p(c, "overhead_vs_layers").c_str(),
                  p(c, "tokens_per_s").c_str());
    os << line;
  }
  os << "(host us: a step's metadata, plan and recording of every layer, submission; GPU us: timestamps around the\n"
        " step; layers alone: the layer count times one layer's write_kv_cache + paged_attention recorded alone)\n";
}

}  // namespace vkattn::tool
