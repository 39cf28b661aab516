// The CPU backend itself: support claims from its registry, errors that name
// the thunk, the arena (constants, strided param bindings) and running a
// multi-thunk schedule in order.
#include <gtest/gtest.h>

#include <omp.h>

#include <cstring>

#include "compile/lower.h"
#include "rlx/session.h"
#include "thunk_harness.h"

namespace rlx::test {
namespace {

TEST(CpuBackend, SupportsEveryThunkKindInEveryFloatType) {
  Backend& cpu = cpu_backend();
  EXPECT_EQ(cpu.name(), "cpu");
  for (int k = 0; k < kNumThunkKinds; ++k)
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      EXPECT_TRUE(cpu.supports(ThunkKind(k), dt)) << "thunk kind " << k << " " << dtype_name(dt);
  EXPECT_TRUE(cpu.supports(ThunkKind::Copy, DType::I32));
  EXPECT_TRUE(cpu.supports(ThunkKind::Gather, DType::I32));
  EXPECT_TRUE(cpu.supports(ThunkKind::Binary, DType::I32));
  EXPECT_FALSE(cpu.supports(ThunkKind::Unary, DType::I32));
  EXPECT_FALSE(cpu.supports(ThunkKind::Argmax, DType::I32));
  EXPECT_FALSE(cpu.supports(ThunkKind::MatMul, DType::I32));
  EXPECT_FALSE(cpu.supports(ThunkKind::Attention, DType::I32));
}

TEST(CpuBackend, UnsupportedThunkFailsAtPrepareNamingIt) {
  Schedule s;
  s.arena_bytes = 1024;
  Thunk t;
  UnaryParams p{};  // i32 add/sub exist (positions on the device); i32 activations do not
  p.dtype = DType::I32;
  t.params = p;
  t.label = "gelu 'of_ids'";
  s.thunks.push_back(t);
  try {
    cpu_backend().prepare(s, CompileOptions{});
    FAIL() << "prepare accepted an i32 unary thunk";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("of_ids"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("i32"), std::string::npos) << e.what();
  }
}

TEST(CpuBackend, ThunkReachingPastTheArenaFailsAtPrepare) {
  Schedule s;
  s.arena_bytes = 1024;
  Thunk t;
  UnaryParams p{};
  p.dtype = DType::F32;
  t.params = p;
  t.label = "gelu 'big'";
  t.uses.push_back({512, 1024, true});
  s.thunks.push_back(t);
  EXPECT_THROW(cpu_backend().prepare(s, CompileOptions{}), Error);
}

TEST(CpuBackend, ThunkKindIsTheKindOfItsParams) {
  Thunk t;
  t.params = UnaryParams{};
  EXPECT_EQ(t.kind(), ThunkKind::Unary);
  t.params = SoftmaxParams{};
  EXPECT_EQ(t.kind(), ThunkKind::Softmax);
  EXPECT_EQ(kind_of<CopyParams>(), ThunkKind::Copy);
  CopyParams c{};
  c.src_dtype = DType::I32;
  c.dst_dtype = DType::F16;
  t.params = c;
  EXPECT_EQ(t.dtype(), DType::I32);  // a copy is keyed by its source
}

// compile() refuses a thunk the backend has no kernel for, naming the node:
// here a lowered matmul whose dtype is changed to i32, which the CPU lacks.
TEST(CpuBackend, UnsupportedThunkFailsAtCompileNamingTheNode) {
  Graph g;
  ValueId x = g.input("x", {3, 5}, DType::F32);
  ValueId w = g.param("w", {5, 7}, DType::F32);
  g.output("y", g.add_node(OpKind::MatMul, {x, w}, MatMulAttrs{}, "proj")[0]);
  std::unique_ptr<Schedule> s = lower(g);
  ASSERT_EQ(s->thunks.size(), 1u);
  EXPECT_NO_THROW(require_support(cpu_backend(), *s, g));
  std::get<MatMulParams>(s->thunks[0].params).dtype = DType::I32;
  try {
    require_support(cpu_backend(), *s, g);
    FAIL() << "an i32 matmul was accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'proj'"), std::string::npos) << m;
    EXPECT_NE(m.find("matmul kernel for i32"), std::string::npos) << m;
  }
}

// A copy thunk reading `count` f32 at src into an output binding at dst.
Schedule copy_out_schedule(uint64_t src, uint64_t dst, int64_t count, uint64_t arena_bytes) {
  Schedule s;
  s.arena_bytes = arena_bytes;
  CopyParams p{};
  p.src = src, p.dst = dst, p.n = count, p.rank = 1;
  p.shape[0] = count, p.src_stride[0] = 1, p.dst_stride[0] = 1;
  p.src_dtype = p.dst_dtype = DType::F32;
  Thunk t;
  t.params = p;
  s.thunks.push_back(t);
  Binding out;
  out.name = "out";
  out.shape = {count};
  out.offset = dst;
  out.inner_bytes = uint64_t(count) * 4;
  out.outer_stride_bytes = out.inner_bytes;
  s.output_bindings.push_back(out);
  return s;
}

TEST(CpuBackend, StridedParamBindingLandsInItsRuns) {
  // A param of 3 rows x 2 f32 inside a group whose rows are 6 f32 apart,
  // at column 2: rows land at 2..3, 8..9, 14..15; the rest stays zero.
  Schedule s = copy_out_schedule(256, 512, 18, 1024);
  Binding param;
  param.name = "l0.k.weight";
  param.shape = {3, 2};
  param.offset = 256 + 2 * 4;
  param.outer = 3;
  param.inner_bytes = 2 * 4;
  param.outer_stride_bytes = 6 * 4;
  s.param_bindings.push_back(param);
  auto exe = cpu_backend().prepare(s, CompileOptions{});
  const float w[6] = {1, 2, 3, 4, 5, 6};
  exe->write_binding(param, w);
  std::vector<float> out(18, -1.f);
  exe->run({}, {out.data()});
  const std::vector<float> expected = {0, 0, 1, 2, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 5, 6, 0, 0};
  EXPECT_EQ(out, expected);
}

TEST(CpuBackend, ConstantsAreWrittenAtPrepare) {
  Schedule s = copy_out_schedule(256, 512, 5, 1024);
  auto data = std::make_shared<std::vector<uint8_t>>(to_bytes({1.5f, -2.f, 3.25f, 0.f, 7.f}, DType::F32));
  s.constants.push_back({256, data});
  auto exe = cpu_backend().prepare(s, CompileOptions{});
  std::vector<float> out(5, -1.f);
  exe->run({}, {out.data()});
  EXPECT_EQ(out, (std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 7.f}));
}

TEST(CpuBackend, RunChecksInputAndOutputCounts) {
  Schedule s = copy_out_schedule(256, 512, 5, 1024);
  auto exe = cpu_backend().prepare(s, CompileOptions{});
  std::vector<float> out(5);
  float in[5] = {};
  EXPECT_THROW(exe->run({in}, {out.data()}), Error);
  EXPECT_THROW(exe->run({}, {}), Error);
}

TEST(CpuBackend, RunsThunksInOrderThroughScratchAndRepeats) {
  // x [7, 33] -> matmul with w [33, 9] -> scratch -> gelu -> out, twice.
  const int64_t m = 7, k = 33, n = 9;
  const uint64_t x_off = 256, w_off = 2048, tmp_off = 4096, out_off = 6144, arena = 8192;
  Schedule s;
  s.arena_bytes = arena;
  MatMulParams mm{};
  mm.a = x_off, mm.b = w_off, mm.bias = kNoBuffer, mm.out = tmp_off;
  mm.batch = 1, mm.m = m, mm.n = n, mm.k = k, mm.lda = k, mm.ldb = n, mm.ldc = n;
  mm.dtype = DType::F32, mm.act = Activation::None;
  UnaryParams act{};
  act.x = tmp_off, act.out = out_off, act.n = m * n, act.dtype = DType::F32, act.act = Activation::Relu;
  s.thunks.push_back({mm});
  s.thunks.push_back({act});
  auto bind = [](const std::string& name, uint64_t off, int64_t count) {
    Binding b;
    b.name = name, b.shape = {count}, b.offset = off, b.inner_bytes = uint64_t(count) * 4;
    b.outer_stride_bytes = b.inner_bytes;
    return b;
  };
  s.input_bindings = {bind("x", x_off, m * k)};
  s.param_bindings = {bind("w", w_off, k * n)};
  s.output_bindings = {bind("out", out_off, m * n)};
  auto exe = cpu_backend().prepare(s, CompileOptions{});
  auto w = random_floats(size_t(k * n), 1500);
  exe->write_binding(s.param_bindings[0], w.data());
  for (uint64_t seed : {1501, 1502}) {
    auto x = random_floats(size_t(m * k), seed);
    std::vector<float> out(size_t(m * n), std::numeric_limits<float>::quiet_NaN());
    exe->run({x.data()}, {out.data()});
    std::vector<double> ref;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t kk = 0; kk < k; ++kk) acc += double(x[size_t(i * k + kk)]) * w[size_t(kk * n + j)];
        ref.push_back(acc > 0 ? acc : 0.0);
      }
    expect_close(out, ref, tolerance(DType::F32), "matmul -> relu run " + std::to_string(seed));
  }
}

}  // namespace
}  // namespace rlx::test

// A run with its own thread count leaves the process's count as it was.
TEST(CpuBackend, ThreadCountIsRestoredAfterARun) {
  rlx::Graph g;
  g.output("y", g.relu(g.input("x", {4}, rlx::DType::F32)));
  rlx::CompileOptions o;
  o.device = rlx::Device::Cpu;
  o.threads = 1;
  const int before = omp_get_max_threads();
  auto out = rlx::compile(g, o)->run({{"x", rlx::HostTensor::from_f32({4}, {-1.f, 2.f, -3.f, 4.f})}});
  EXPECT_EQ(out["y"].to_f32(), (std::vector<float>{0.f, 2.f, 0.f, 4.f}));
  EXPECT_EQ(omp_get_max_threads(), before);
}
