// Execution paths of the CUDA backend on multi-thunk schedules: mode choice
// (auto, explicit, RLX_EXEC), replay after new inputs and params,
// pipelined submit/wait through the ring, and the trace file.
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "gpu/gpu_harness.h"

namespace rlx::gputest {
namespace {

constexpr int64_t kRows = 7, kCols = 129;

// x (f32) -> cast f16 -> * w -> gelu -> layernorm -> softmax. The gelu may be
// marked not capture-safe, so the forward cannot be recorded.
void build_chain(Case& c, bool gelu_capture_safe) {
  const int64_t n = kRows * kCols;
  c.add("x", DType::F32, n, Role::Input);
  c.add("w", DType::F16, kCols, Role::Param);
  c.add("gamma", DType::F16, kCols, Role::Param);
  c.add("beta", DType::F16, kCols, Role::Param);
  c.add("t0", DType::F16, n, Role::Output);
  c.add("t1", DType::F16, n, Role::Output);
  c.add("t2", DType::F16, n, Role::Output);
  c.add("t3", DType::F16, n, Role::Output);
  c.add("out", DType::F16, n, Role::Output);
  c.random("x", -2.f, 2.f);
  c.random("w", 0.5f, 1.5f);
  c.random("gamma", 0.5f, 1.5f);
  c.random("beta");

  CopyParams cp{};
  cp.src = c.buf("x").offset; cp.dst = c.buf("t0").offset; cp.n = n; cp.rank = 1;
  cp.shape[0] = n; cp.src_stride[0] = 1; cp.dst_stride[0] = 1;
  cp.src_dtype = DType::F32; cp.dst_dtype = DType::F16;
  c.thunk(ThunkKind::Copy, cp, "copy 'cast'");

  BinaryParams bp{};
  bp.a = c.buf("t0").offset; bp.b = c.buf("w").offset; bp.out = c.buf("t1").offset; bp.n = n; bp.rank = 2;
  bp.shape[0] = kRows; bp.shape[1] = kCols;
  bp.stride_a[0] = kCols; bp.stride_a[1] = 1; bp.stride_b[0] = 0; bp.stride_b[1] = 1;
  bp.dtype = DType::F16; bp.op = BinaryOp::Mul;
  c.thunk(ThunkKind::Binary, bp, "binary 'scale'");

  UnaryParams up{};
  up.x = c.buf("t1").offset; up.out = c.buf("t2").offset; up.n = n; up.dtype = DType::F16; up.act = Activation::Gelu;
  c.thunk(ThunkKind::Unary, up, "unary 'gelu'", gelu_capture_safe);

  NormParams np{};
  np.x = c.buf("t2").offset; np.residual = kNoBuffer; np.gamma = c.buf("gamma").offset; np.beta = c.buf("beta").offset;
  np.out = c.buf("t3").offset; np.sum_out = kNoBuffer; np.rows = kRows; np.cols = kCols; np.eps = 1e-5f;
  np.dtype = DType::F16; np.kind = NormKind::Layer;
  c.thunk(ThunkKind::Norm, np, "norm 'ln'");

  SoftmaxParams sp{};
  sp.x = c.buf("t3").offset; sp.out = c.buf("out").offset; sp.rows = kRows; sp.cols = kCols; sp.dtype = DType::F16;
  c.thunk(ThunkKind::Softmax, sp, "softmax 'sm'");
}

// Reference for the chain, in double from the f16-rounded intermediates the
// device stores.
std::map<std::string, std::vector<double>> chain_reference(Case& c) {
  auto round16 = [](double v) { return double(half_to_float(float_to_half(float(v)))); };
  const int64_t n = kRows * kCols;
  std::vector<double> t0(n), t1(n), t2(n), t3(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    t0[i] = round16(c.in("x", i));
    t1[i] = round16(t0[i] * c.in("w", i % kCols));
    t2[i] = round16(act_ref(Activation::Gelu, t1[i]));
  }
  for (int64_t r = 0; r < kRows; ++r) {
    double mean = 0, var = 0, m = -1e300, s = 0;
    for (int64_t j = 0; j < kCols; ++j) mean += t2[r * kCols + j];
    mean /= kCols;
    for (int64_t j = 0; j < kCols; ++j) var += (t2[r * kCols + j] - mean) * (t2[r * kCols + j] - mean);
    var /= kCols;
    for (int64_t j = 0; j < kCols; ++j) {
      double y = (t2[r * kCols + j] - mean) / std::sqrt(var + 1e-5) * c.in("gamma", j) + c.in("beta", j);
      t3[r * kCols + j] = round16(y);
      m = std::max(m, t3[r * kCols + j]);
    }
    for (int64_t j = 0; j < kCols; ++j) s += std::exp(t3[r * kCols + j] - m);
    for (int64_t j = 0; j < kCols; ++j) out[r * kCols + j] = std::exp(t3[r * kCols + j] - m) / s;
  }
  return {{"t0", t0}, {"t1", t1}, {"t2", t2}, {"t3", t3}, {"out", out}};
}

void expect_chain(Case& c, BackendExecutable& exe, const std::string& what) {
  auto got = c.run(exe);
  auto want = chain_reference(c);
  for (auto& [name, ref] : want) expect_close(got.at(name), ref, tol_for(DType::F16, 2.0), what + " " + name);
}

class Execution : public ::testing::Test {
 protected:
  void SetUp() override { RLX_REQUIRE_GPU(); }
};

// A thunk that cannot be recorded makes auto run the forward per op, and an
// explicit graph mode refuse it naming the thunk. (No lowering produces such a
// thunk today; the harness marks one.)
TEST_F(Execution, AutoPicksGraphOnlyWhenEverythingIsCaptureSafe) {
  Case safe, unsafe;
  build_chain(safe, true);
  build_chain(unsafe, false);
  auto a = safe.prepare(ExecMode::Auto);
  auto b = unsafe.prepare(ExecMode::Auto);
  EXPECT_EQ(as_cuda(*a).mode(), ExecMode::Graph);
  EXPECT_EQ(as_cuda(*b).mode(), ExecMode::PerOp);
  EXPECT_EQ(as_cuda(*a).schedule_string(), "+++++");
  EXPECT_EQ(as_cuda(*b).schedule_string(), "-----");
  expect_chain(safe, *a, "auto graph");
  expect_chain(unsafe, *b, "auto per op");
  EXPECT_EQ(as_cuda(*b).counters().graph_launches, 0u);
  EXPECT_EQ(as_cuda(*b).counters().perop_launches, 5u);
  Case forced;
  build_chain(forced, false);
  try {
    forced.prepare(ExecMode::Graph);
    FAIL() << "graph mode recorded a thunk that is not capture-safe";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unary 'gelu'"), std::string::npos) << e.what();
  }
}

// RLX_EXEC picks the mode only when the program asked for auto.
TEST_F(Execution, EnvironmentChoosesOnlyForAuto) {
  Case c;
  build_chain(c, true);
  ::setenv("RLX_EXEC", "perop", 1);
  auto by_env = c.prepare(ExecMode::Auto);
  auto explicit_graph = c.prepare(ExecMode::Graph);
  ::unsetenv("RLX_EXEC");
  EXPECT_EQ(as_cuda(*by_env).mode(), ExecMode::PerOp);
  EXPECT_EQ(as_cuda(*explicit_graph).mode(), ExecMode::Graph);
  expect_chain(c, *by_env, "perop by env");
  EXPECT_EQ(as_cuda(*by_env).counters().graph_launches, 0u);
  EXPECT_EQ(as_cuda(*by_env).counters().perop_launches, 5u);
  expect_chain(c, *explicit_graph, "graph despite env");
  EXPECT_EQ(as_cuda(*explicit_graph).counters().graph_launches, 1u);
}

TEST_F(Execution, GraphReplaysWithNewInputsAndNewParams) {
  Case c;
  build_chain(c, true);
  auto exe = c.prepare(ExecMode::Graph);
  auto& cu = as_cuda(*exe);
  EXPECT_EQ(cu.graph_kernel_nodes(), 5);
  EXPECT_EQ(cu.graph_memcpy_nodes(), 1 + 5);  // one input, five outputs
  expect_chain(c, *exe, "first");
  c.random("x", -2.f, 2.f);
  expect_chain(c, *exe, "new input");
  c.random("w", -1.5f, -0.5f);  // params change after recording
  c.random("gamma", 0.5f, 1.5f);
  c.write_params(*exe);
  expect_chain(c, *exe, "new params");
  EXPECT_EQ(cu.counters().graph_launches, 3u);
  EXPECT_EQ(cu.counters().perop_launches, 0u);
}

// time_device_forwards replays the kernels alone on the last run's inputs:
// in graph mode a second recording without the copies. The replays write
// the outputs again (poisoned in the arena first, then read back right),
// take positive device time, and leave the next run's results right.
TEST_F(Execution, DeviceTimedForwardsRunTheKernelsWithoutCopies) {
  for (ExecMode mode : {ExecMode::Graph, ExecMode::PerOp}) {
    Case c;
    build_chain(c, true);
    auto exe = c.prepare(mode);
    auto& cu = as_cuda(*exe);
    expect_chain(c, *exe, std::string(mode_name(mode)) + " before timing");
    const uint64_t launches = cu.counters().graph_launches, forwards = cu.counters().forwards;
    const uint64_t out = c.buf("out").offset, bytes = uint64_t(kRows * kCols) * 2;
    ASSERT_EQ(cudaMemset(cu.arena() + out, 0xff, bytes), cudaSuccess);  // NaN in f16
    std::vector<double> us = exe->time_device_forwards(3);
    ASSERT_EQ(us.size(), 3u);
    for (double u : us) {
      EXPECT_TRUE(std::isfinite(u)) << mode_name(mode);
      EXPECT_GT(u, 0.0) << mode_name(mode);
      EXPECT_LT(u, 1e6) << mode_name(mode);
    }
    std::vector<uint8_t> got(bytes);
    ASSERT_EQ(cudaMemcpy(got.data(), cu.arena() + out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_close(Case::to_double(got, DType::F16), chain_reference(c).at("out"), tol_for(DType::F16, 2.0),
                 std::string(mode_name(mode)) + " outputs written by the timed replays");
    if (mode == ExecMode::Graph) {
      EXPECT_EQ(cu.device_timing_nodes().kernels, 5);
      EXPECT_EQ(cu.device_timing_nodes().memcpys, 0);
    } else {
      EXPECT_EQ(cu.device_timing_nodes().kernels, 0);  // per op: nothing recorded
    }
    EXPECT_EQ(cu.counters().graph_launches, launches) << "timed replays are not forwards";
    EXPECT_EQ(cu.counters().forwards, forwards);
    c.random("x", -2.f, 2.f);
    expect_chain(c, *exe, std::string(mode_name(mode)) + " after timing");
  }
}

// >= 64 runs through a ring of 4 give exactly the sequential results, in
// every mode, with waits both in order and after the ring has wrapped.
TEST_F(Execution, PipelinedEqualsSequential) {
  for (ExecMode mode : {ExecMode::Graph, ExecMode::PerOp}) {
    Case c;
    build_chain(c, true);
    auto exe = c.prepare(mode, 4);
    const Schedule& s = c.prepared_schedule();
    const int runs = 70;
    std::vector<std::vector<uint8_t>> inputs;
    std::vector<std::vector<std::vector<uint8_t>>> seq(runs);
    auto alloc_outs = [&](std::vector<std::vector<uint8_t>>& o) {
      std::vector<void*> ptrs;
      for (const Binding& b : s.output_bindings) o.emplace_back(b.bytes(), 0);
      for (auto& v : o) ptrs.push_back(v.data());
      return ptrs;
    };
    for (int r = 0; r < runs; ++r) {
      c.random("x", -3.f, 3.f);
      inputs.push_back(c.buf("x").host);
      exe->run({inputs.back().data()}, alloc_outs(seq[r]));
    }
    std::vector<std::vector<std::vector<uint8_t>>> piped(runs);
    std::vector<uint64_t> tickets;
    int waited = 0;
    for (int r = 0; r < runs; ++r) {
      tickets.push_back(exe->submit({inputs[r].data()}));
      // Let up to 6 runs be outstanding, more than the ring holds.
      if (r - waited >= 6) {
        exe->wait(tickets[waited], alloc_outs(piped[waited]));
        ++waited;
      }
    }
    for (; waited < runs; ++waited) exe->wait(tickets[waited], alloc_outs(piped[waited]));
    for (int r = 0; r < runs; ++r) {
      bool nonzero = false;
      for (size_t o = 0; o < seq[r].size(); ++o) {
        EXPECT_EQ(seq[r][o], piped[r][o]) << mode_name(mode) << " run " << r << " output " << o;
        for (uint8_t byte : seq[r][o]) nonzero |= byte != 0;
      }
      EXPECT_TRUE(nonzero) << mode_name(mode) << " run " << r;
    }
    // The sequential results are right, not merely equal: check the last.
    auto want = chain_reference(c);
    expect_close(Case::to_double(seq[runs - 1].back(), DType::F16), want["out"], tol_for(DType::F16, 2.0),
                 std::string(mode_name(mode)) + " last sequential run");
    EXPECT_THROW(exe->wait(tickets[0], alloc_outs(piped[0])), Error);  // already collected
  }
}

TEST_F(Execution, TraceJsonHasOneEventPerThunk) {
  Case c;
  build_chain(c, true);
  // The process id keeps concurrent runs of the suite (sanitizer shards) apart.
  const std::string path = ::testing::TempDir() + "rlx_trace_test." + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  auto exe = c.prepare(ExecMode::Graph, 4, path);
  expect_chain(c, *exe, "traced");
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << path;
  auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["traceEvents"].size(), 5u);
  EXPECT_EQ(j["traceEvents"][3]["name"], "norm 'ln'");
  double total = 0;
  for (auto& e : j["traceEvents"]) total += e["dur"].get<double>();
  EXPECT_GT(total, 0.0);
}

}  // namespace
}  // namespace rlx::gputest
