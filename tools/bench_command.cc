// `rlx bench`: the demo encoder (the BERT graph) with random weights, run in every
// execution mode of the chosen device; one table of latencies.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <time.h>

#include "models/bert.h"
#include "models/encoder_demo.h"
#include "rlx/error.h"
#include "rlx/session.h"
#include "thunks/thunk.h"
#include "tools/cli_options.h"
#include "tools/profile_range.h"
#include "tools/commands.h"

namespace {

struct Row {
  std::string mode;
  double median_us = 0, p90_us = 0, runs_per_s = 0;
  // Median process CPU time per run (synchronous modes): unlike wall time,
  // it does not count the time other processes held the cores.
  double median_cpu_us = -1;
};

double process_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return 1e6 * double(t.tv_sec) + 1e-3 * double(t.tv_nsec);
}

std::map<std::string, rlx::HostTensor> demo_inputs(const rlx::EncoderShape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(size_t(s.batch * s.seq)), mask(ids.size(), 1);
  for (auto& i : ids) i = int32_t(rng() % uint32_t(s.vocab));
  for (int b = 1; b < s.batch; ++b)  // later rows padded a little, as real batches are
    for (int t = s.seq - b % s.seq; t < s.seq; ++t) mask[size_t(b * s.seq + t)] = 0;
  return {{"input_ids", rlx::HostTensor::from_i32({s.batch, s.seq}, ids)},
          {"attention_mask", rlx::HostTensor::from_i32({s.batch, s.seq}, mask)}};
}

void fill_random_params(rlx::Executable& exe, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (const rlx::Binding& b : exe.schedule().param_bindings) {
    std::vector<float> v(size_t(rlx::numel(b.shape)));
    bool scale = b.name.find("LayerNorm.weight") != std::string::npos;  // norm scales near 1
    for (auto& x : v) x = scale ? 1.f + u(rng) : u(rng);
    exe.set_param_f32(b.name, v.data(), v.size());
  }
}

// The row's median and p90 of per-run times (sorted in place).
void set_percentiles(Row& r, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  r.median_us = us[us.size() / 2];
  r.p90_us = us[std::min(us.size() - 1, us.size() * 9 / 10)];
}

Row time_mode(const std::string& mode, rlx::Executable& exe, const std::map<std::string, rlx::HostTensor>& in,
              int runs, int warmup, bool pipelined) {
  using clk = std::chrono::steady_clock;
  Row r{mode};
  for (int i = 0; i < warmup; ++i) exe.run(in);
  ProfileRange range("rlx bench " + mode);
  std::vector<double> us;
  if (pipelined) {
    // Two runs in flight through submit/wait; each output is dropped as it
    // arrives (holding every run's outputs would time host allocation). The
    // row's median and p90 are of the intervals between completions.
    constexpr size_t kDepth = 2;
    std::vector<uint64_t> tickets;
    auto all0 = clk::now(), last = all0;
    for (int i = 0; i < runs; ++i) {
      if (tickets.size() == kDepth) {
        exe.wait(tickets.front());
        tickets.erase(tickets.begin());
        auto now = clk::now();
        us.push_back(std::chrono::duration<double, std::micro>(now - last).count());
        last = now;
      }
      tickets.push_back(exe.submit(in));
    }
    for (uint64_t t : tickets) {
      exe.wait(t);
      auto now = clk::now();
      us.push_back(std::chrono::duration<double, std::micro>(now - last).count());
      last = now;
    }
    if (us.size() > 1) us.erase(us.begin());  // the first interval includes the pipeline's fill
    double total = std::chrono::duration<double>(last - all0).count();
    set_percentiles(r, us);
    r.runs_per_s = runs / total;
    return r;
  }
  auto all0 = clk::now();
  std::vector<double> cpu_us;
  for (int i = 0; i < runs; ++i) {
    auto t0 = clk::now();
    const double c0 = process_cpu_us();
    exe.run(in);
    cpu_us.push_back(process_cpu_us() - c0);
    us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
  }
  double total = std::chrono::duration<double>(clk::now() - all0).count();
  std::sort(cpu_us.begin(), cpu_us.end());
  if (!cpu_us.empty()) r.median_cpu_us = cpu_us[cpu_us.size() / 2];
  set_percentiles(r, us);
  r.runs_per_s = runs / total;
  return r;
}

// The forward's kernels alone on the device ("graph device"): the inputs of
// the timed runs stay in the arena, nothing is copied in or out, and each
// forward is timed by CUDA events around its launch, as bench/bench_bert.py
// times PyTorch's CUDA-graph replays. runs/s is over the device time only.
Row time_device(rlx::Executable& exe, int runs, int warmup) {
  Row r{"graph device"};
  if (warmup > 0) exe.time_device_forwards(warmup);
  ProfileRange range("rlx bench graph device");
  std::vector<double> us = exe.time_device_forwards(runs);
  RLX_CHECK(!us.empty(), "bench: the backend gave no device times");
  double total = 0;
  for (double u : us) total += u;
  set_percentiles(r, us);
  r.runs_per_s = double(us.size()) / (total * 1e-6);
  return r;
}

// GPU time per thunk kind from a trace written by the backend, largest first,
// and the slowest thunks: where a forward pass spends its time.
void print_trace_summary(const std::string& path) {
  std::ifstream in(path);
  RLX_CHECK(in, "bench: no trace was written to '" << path << "'");
  nlohmann::json j = nlohmann::json::parse(in);
  std::map<std::string, std::pair<double, int>> by_kind;
  std::vector<std::pair<double, std::string>> thunks;
  double total = 0;
  for (const auto& e : j["traceEvents"]) {
    double us = e["dur"].get<double>();
    auto& k = by_kind[e["cat"].get<std::string>()];
    k.first += us;
    ++k.second;
    thunks.emplace_back(us, e["name"].get<std::string>());
    total += us;
  }
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto& [name, v] : by_kind)
    kinds.emplace_back(v.first, name + " x" + std::to_string(v.second));
  std::sort(kinds.rbegin(), kinds.rend());
  std::sort(thunks.rbegin(), thunks.rend());
  std::fprintf(stderr, "rlx bench: per-op GPU time %.1f us over %zu thunks (trace %s)\n", total, thunks.size(),
               path.c_str());
  for (const auto& [us, name] : kinds)
    std::fprintf(stderr, "  %-22s %10.1f us %5.1f%%\n", name.c_str(), us, 100 * us / std::max(total, 1e-9));
  for (size_t i = 0; i < std::min<size_t>(6, thunks.size()); ++i)
    std::fprintf(stderr, "  slowest: %-40s %8.1f us\n", thunks[i].second.c_str(), thunks[i].first);
}

// Random ids below the vocabulary, every row unpadded, token types zero.
std::map<std::string, rlx::HostTensor> model_inputs(int64_t vocab, int64_t batch, int64_t seq, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(size_t(batch * seq)), mask(ids.size(), 1), types(ids.size(), 0);
  for (auto& i : ids) i = int32_t(rng() % uint32_t(vocab));
  return {{"input_ids", rlx::HostTensor::from_i32({batch, seq}, ids)},
          {"attention_mask", rlx::HostTensor::from_i32({batch, seq}, mask)},
          {"token_type_ids", rlx::HostTensor::from_i32({batch, seq}, types)}};
}

void print_rows(const std::vector<Row>& rows, const std::string& title, bool json, int batch, int seq,
                const std::string& dtype, bool gpu) {
  if (json) {
    for (const Row& r : rows)
      std::printf("{\"mode\": \"%s\", \"median_us\": %.2f, \"p90_us\": %.2f, \"runs_per_s\": %.2f, "
                  "\"median_cpu_us\": %.2f, \"batch\": %d, \"seq\": %d, \"dtype\": \"%s\", \"device\": \"%s\"}\n",
                  r.mode.c_str(), r.median_us, r.p90_us, r.runs_per_s, r.median_cpu_us, batch, seq, dtype.c_str(),
                  gpu ? "cuda" : "cpu");
    return;
  }
  std::printf("%s\n", title.c_str());
  std::printf("%-16s %12s %12s %10s\n", "mode", "median_us", "p90_us", "runs/s");
  for (const Row& r : rows)
    std::printf("%-16s %12.1f %12.1f %10.1f\n", r.mode.c_str(), r.median_us, r.p90_us, r.runs_per_s);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Time a model (--model DIR) or the BERT-shaped demo encoder in every execution mode");
  auto s = std::make_shared<rlx::EncoderShape>();
  auto device = std::make_shared<std::string>("auto");
  auto dtype = std::make_shared<std::string>("f32");
  auto model = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto runs = std::make_shared<int>(50);
  auto warmup = std::make_shared<int>(5);
  auto trace = std::make_shared<std::string>();
  auto threads = std::make_shared<int>(0);
  auto quantize = std::make_shared<std::string>();
  cmd->add_option("--model", *model, "Hugging Face BERT directory; without it, the demo encoder");
  cmd->add_option("--layers", s->layers, "encoder layers (demo encoder)");
  cmd->add_option("--hidden", s->hidden, "hidden size (demo encoder)");
  cmd->add_option("--heads", s->heads, "attention heads (demo encoder)");
  cmd->add_option("--ffn", s->ffn, "feed-forward size (demo encoder)");
  cmd->add_option("--batch", s->batch, "batch");
  cmd->add_option("--seq", s->seq, "sequence length");
  cmd->add_option("--device", *device, "auto, cpu, cuda or cuda:N (a GPU by index)")->check(device_choices());
  cmd->add_option("--dtype", *dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--quantize", *quantize, kQuantizeInt8Help)->check(CLI::IsMember({"int8"}));
  cmd->add_option("--runs", *runs, "timed runs per mode");
  cmd->add_option("--warmup", *warmup, "untimed runs first");
  cmd->add_option("--threads", *threads, "CPU threads (0 = physical cores)")->check(non_negative());
  cmd->add_flag("--json", *json, "one JSON object per row instead of the table");
  cmd->add_option("--trace-json", *trace,
                  "cuda: write per-thunk GPU times of the graph executable here (Chrome trace) and print a "
                  "summary by thunk kind on stderr");
  cmd->callback([=] {
    check_count("--runs", *runs, 1, 1000000);
    check_count("--warmup", *warmup, 0, 1000000);
    check_batch_seq(s->batch, s->seq);
    s->dtype = dtype_option(*dtype);
    const bool int8 = int8_option(*quantize);
    const std::string label = *dtype + (int8 ? " int8 products" : "");
    bool gpu = device_option(*device, int8) == rlx::Device::Cuda;
    std::vector<Row> rows;
    std::string title;

    if (!model->empty()) {
      rlx::BertConfig cfg = rlx::load_bert_config(*model);
      auto in = model_inputs(cfg.vocab_size, s->batch, s->seq, 7);
      if (cfg.type_vocab_size == 0) in.erase("token_type_ids");  // DistilBERT has none
      auto load = [&](rlx::ExecMode m, const std::string& trace_json = "") {
        rlx::BertLoadOptions o;
        o.dtype = s->dtype;
        o.device = gpu ? rlx::Device::Cuda : rlx::Device::Cpu;
        o.mode = m;
        o.batch = s->batch;
        o.seq = s->seq;
        o.trace_json = trace_json;
        o.threads = *threads;
        o.int8_products = int8;
        return rlx::load_bert(*model, o);
      };
      if (gpu) {
        {
          auto exe = load(rlx::ExecMode::PerOp);
          rows.push_back(time_mode("perop", *exe, in, *runs, *warmup, false));
        }
        auto exe = load(rlx::ExecMode::Graph, *trace);
        rows.push_back(time_mode("graph", *exe, in, *runs, *warmup, false));
        rows.push_back(time_mode("graph pipelined", *exe, in, *runs, *warmup, true));
        rows.push_back(time_device(*exe, *runs, *warmup));
        if (!trace->empty()) print_trace_summary(*trace);
      } else {
        auto exe = load(rlx::ExecMode::Auto);
        rows.push_back(time_mode("cpu", *exe, in, *runs, *warmup, false));
      }
      char buf[512];
      std::snprintf(buf, sizeof buf, "rlx bench: %s (%d layers, hidden %d, heads %d, ffn %d), batch %d, seq %d, %s, %s",
                    model->c_str(), cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads,
                    cfg.intermediate_size, s->batch, s->seq, label.c_str(), gpu ? "cuda" : "cpu");
      title = buf;
      print_rows(rows, title, *json, s->batch, s->seq, label, gpu);
      return;
    }

    rlx::Graph g = rlx::build_encoder_demo(*s);
    auto in = demo_inputs(*s, 7);
    auto compile_mode = [&](rlx::ExecMode m) {
      rlx::CompileOptions o;
      o.device = gpu ? rlx::Device::Cuda : rlx::Device::Cpu;
      o.mode = m;
      o.threads = *threads;
      o.int8_products = int8;
      if (m == rlx::ExecMode::Graph) o.trace_json = *trace;  // written after the first run
      auto exe = rlx::compile(g, o);
      fill_random_params(*exe, 1);
      return exe;
    };
    if (gpu) {
      for (auto [name, m] : {std::pair{"perop", rlx::ExecMode::PerOp}, {"graph", rlx::ExecMode::Graph}}) {
        auto exe = compile_mode(m);
        rows.push_back(time_mode(name, *exe, in, *runs, *warmup, false));
        if (m == rlx::ExecMode::Graph) {
          rows.push_back(time_mode("graph pipelined", *exe, in, *runs, *warmup, true));
          rows.push_back(time_device(*exe, *runs, *warmup));
        }
      }
      if (!trace->empty()) print_trace_summary(*trace);
    } else {
      auto exe = compile_mode(rlx::ExecMode::Auto);
      rows.push_back(time_mode("cpu", *exe, in, *runs, *warmup, false));
    }
    char buf[512];
    std::snprintf(buf, sizeof buf, "rlx bench: encoder %d layers, hidden %d, heads %d, ffn %d, batch %d, seq %d, %s, %s",
                  s->layers, s->hidden, s->heads, s->ffn, s->batch, s->seq, label.c_str(), gpu ? "cuda" : "cpu");
    title = buf;
    print_rows(rows, title, *json, s->batch, s->seq, label, gpu);
  });
}
