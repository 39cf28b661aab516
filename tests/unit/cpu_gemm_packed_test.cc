// The packed GEMM (weights packed once) against a double-precision reference
// on sizes that are not multiples of its tiles, and the CPU backend's use of
// it: which matmuls take it, and that a weight written after a run is seen by
// the next run (a stale packed copy would not be).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_gemm_packed.h"
#include "models/bert.h"
#include "models/test_files.h"  // tests/models
#include "reference_ops.h"
#include "rlx/session.h"
#include "test_util.h"

namespace rlx::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b, bias;
  Activation act;
};

// Runs gemm_packed on `threads` threads with B stored in dt; returns C with
// one poisoned padding column per row, checked to stay NaN.
std::vector<float> run_packed(const Case& c, DType dt, int threads, const std::vector<float>& a,
                              const std::vector<float>& b, const std::vector<float>& bias) {
  const int64_t lda = c.trans_a ? c.m + 1 : c.k + 1, ldb = c.trans_b ? c.k + 2 : c.n + 2, ldc = c.n + 1;
  std::vector<float> packed(size_t(cpu::packed_weights_floats(c.n, c.k)) + 16, kNaN);
  float* dst = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(packed.data()) + 63) / 64 * 64);
  const std::vector<uint8_t> b_bytes = to_bytes(b, dt);
  cpu::with_float_type(dt, [&](auto t) {
    using T = decltype(t);
    cpu::pack_weights(reinterpret_cast<const T*>(b_bytes.data()), c.n, c.k, ldb, c.trans_b, dst);
  });
  std::vector<float> out(size_t(std::max<int64_t>(c.m, 1) * ldc), kNaN);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  cpu::gemm_packed(c.trans_a, c.m, c.n, c.k, a.data(), lda, dst, out.data(), ldc, c.bias ? bias.data() : nullptr,
                   c.act, threads);
  omp_set_num_threads(saved);
  for (int64_t i = 0; i < c.m; ++i) EXPECT_TRUE(std::isnan(out[size_t(i * ldc + c.n)])) << "wrote row padding";
  return out;
}

void check_case(const Case& c, DType dt, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k << " trans_a " << c.trans_a
                                  << " trans_b " << c.trans_b << " bias " << c.bias << " act " << int(c.act) << " "
                                  << dtype_name(dt));
  const int64_t lda = c.trans_a ? c.m + 1 : c.k + 1, ldb = c.trans_b ? c.k + 2 : c.n + 2, ldc = c.n + 1;
  const auto a = random_floats(size_t((c.trans_a ? c.k : c.m) * lda), seed);
  const auto b = quantize(random_floats(size_t((c.trans_b ? c.n : c.k) * ldb), seed + 1), dt);
  const auto bias = random_floats(size_t(c.n), seed + 2, -2.f, 2.f);
  const auto got = run_packed(c, dt, 2, a, b, bias);
  std::vector<float> g;
  std::vector<double> ref;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = c.bias ? bias[size_t(j)] : 0.0;
      for (int64_t kk = 0; kk < c.k; ++kk)
        s += double(c.trans_a ? a[size_t(kk * lda + i)] : a[size_t(i * lda + kk)]) *
             double(c.trans_b ? b[size_t(j * ldb + kk)] : b[size_t(kk * ldb + j)]);
      ref.push_back(ref_activation(c.act, s));
      g.push_back(got[size_t(i * ldc + j)]);
    }
  expect_close(g, ref, 1e-5, "packed gemm");
}

TEST(CpuPackedGemm, MatchesDoubleReferenceOnOddSizes) {
  if (!cpu::packed_gemm_available()) GTEST_SKIP() << "no AVX-512F";
  uint64_t seed = 100;
  // m: one row, a partial tile, tiles plus a remainder, more than one block
  // of rows (150); n: partial panels; k: 600 takes two k blocks.
  for (int64_t m : {1, 7, 13, 33, 130, 150})
    for (int64_t n : {1, 7, 33, 130})
      for (int64_t k : {1, 7, 33, 600})
        check_case({m, n, k, false, true, false, Activation::None}, DType::F32, seed++);
}

TEST(CpuPackedGemm, TransposesBiasAndActivations) {
  if (!cpu::packed_gemm_available()) GTEST_SKIP() << "no AVX-512F";
  uint64_t seed = 300;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Activation act : {Activation::None, Activation::Gelu, Activation::Silu, Activation::Relu}) {
        check_case({33, 65, 130, ta, tb, true, act}, DType::F32, seed++);
        check_case({7, 33, 600, ta, tb, false, act}, DType::F32, seed++);
      }
}

TEST(CpuPackedGemm, WidensHalfAndBFloatWeights) {
  if (!cpu::packed_gemm_available()) GTEST_SKIP() << "no AVX-512F";
  check_case({13, 33, 130, false, true, true, Activation::Gelu}, DType::F16, 400);
  check_case({13, 33, 130, false, false, false, Activation::None}, DType::BF16, 401);
}

TEST(CpuPackedGemm, EmptyInnerProductIsBiasThroughActivation) {
  if (!cpu::packed_gemm_available()) GTEST_SKIP() << "no AVX-512F";
  const Case c{5, 33, 0, false, true, true, Activation::Relu};
  const std::vector<float> a(8, 1.f), b(40, 1.f);
  const auto bias = random_floats(33, 500, -2.f, 2.f);
  const auto got = run_packed(c, DType::F32, 1, a, b, bias);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) EXPECT_EQ(got[size_t(i * 34 + j)], std::max(bias[size_t(j)], 0.f));
}

TEST(CpuPackedGemm, SameBitsOnOneTwoAndThreeThreads) {
  if (!cpu::packed_gemm_available()) GTEST_SKIP() << "no AVX-512F";
  const Case c{301, 389, 700, false, true, true, Activation::Gelu};
  const auto a = random_floats(size_t(c.m * (c.k + 1)), 600);
  const auto b = random_floats(size_t(c.n * (c.k + 2)), 601);
  const auto bias = random_floats(size_t(c.n), 602);
  const auto one = run_packed(c, DType::F32, 1, a, b, bias);
  for (int threads : {2, 3}) {
    const auto got = run_packed(c, DType::F32, threads, a, b, bias);
    ASSERT_EQ(got.size(), one.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i)
      differ += std::memcmp(&got[i], &one[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << threads << " threads";
  }
}

// The bf16 kernel on A and B already rounded to bf16 (so the products are
// exact in f32 and only the f32 sums differ from the double reference). A's
// row padding is NaN: an odd k's last pair must not read past the row.
std::vector<float> run_packed_bf16(const Case& c, int threads, const std::vector<float>& a,
                                   const std::vector<float>& b, const std::vector<float>& bias) {
  const int64_t lda = c.trans_a ? c.m + 1 : c.k + 1, ldb = c.trans_b ? c.k + 2 : c.n + 2, ldc = c.n + 1;
  std::vector<uint32_t> packed(size_t(cpu::packed_bf16_words(c.n, c.k)) + 16, 0xffffffffu);
  auto* dst = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(packed.data()) + 63) / 64 * 64);
  std::vector<float> a_poisoned = a;
  for (int64_t r = 0; r < (c.trans_a ? c.k : c.m); ++r) a_poisoned[size_t(r * lda + lda - 1)] = kNaN;
  const std::vector<uint8_t> a_bytes = to_bytes(a_poisoned, DType::BF16), b_bytes = to_bytes(b, DType::BF16);
  cpu::pack_weights_bf16_pairs(reinterpret_cast<const cpu::BFloat*>(b_bytes.data()), c.n, c.k, ldb, c.trans_b, dst);
  std::vector<float> out(size_t(std::max<int64_t>(c.m, 1) * ldc), kNaN);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  cpu::gemm_packed_bf16(c.trans_a, c.m, c.n, c.k, reinterpret_cast<const cpu::BFloat*>(a_bytes.data()), lda, dst,
                        out.data(), ldc, c.bias ? bias.data() : nullptr, c.act, threads);
  omp_set_num_threads(saved);
  for (int64_t i = 0; i < c.m; ++i) EXPECT_TRUE(std::isnan(out[size_t(i * ldc + c.n)])) << "wrote row padding";
  return out;
}

void check_case_bf16(const Case& c, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "bf16 m " << c.m << " n " << c.n << " k " << c.k << " trans_a " << c.trans_a
                                  << " trans_b " << c.trans_b << " bias " << c.bias << " act " << int(c.act));
  const int64_t lda = c.trans_a ? c.m + 1 : c.k + 1, ldb = c.trans_b ? c.k + 2 : c.n + 2, ldc = c.n + 1;
  const auto a = quantize(random_floats(size_t((c.trans_a ? c.k : c.m) * lda), seed), DType::BF16);
  const auto b = quantize(random_floats(size_t((c.trans_b ? c.n : c.k) * ldb), seed + 1), DType::BF16);
  const auto bias = random_floats(size_t(c.n), seed + 2, -2.f, 2.f);
  const auto got = run_packed_bf16(c, 2, a, b, bias);
  std::vector<float> g;
  std::vector<double> ref;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = c.bias ? bias[size_t(j)] : 0.0;
      for (int64_t kk = 0; kk < c.k; ++kk)
        s += double(c.trans_a ? a[size_t(kk * lda + i)] : a[size_t(i * lda + kk)]) *
             double(c.trans_b ? b[size_t(j * ldb + kk)] : b[size_t(kk * ldb + j)]);
      ref.push_back(ref_activation(c.act, s));
      g.push_back(got[size_t(i * ldc + j)]);
    }
  expect_close(g, ref, 1e-5, "bf16 packed gemm");
}

TEST(CpuPackedGemmBf16, MatchesDoubleReferenceOnOddSizes) {
  if (!cpu::packed_bf16_available()) GTEST_SKIP() << "no AVX512-BF16";
  uint64_t seed = 800;
  // k: one (a lone half pair), odd and even, 1601 takes three k blocks of
  // pairs with an odd last one.
  for (int64_t m : {1, 7, 13, 150})
    for (int64_t n : {1, 33, 130})
      for (int64_t k : {1, 2, 7, 34, 1601})
        check_case_bf16({m, n, k, false, true, false, Activation::None}, seed++);
}

TEST(CpuPackedGemmBf16, TransposesBiasAndActivations) {
  if (!cpu::packed_bf16_available()) GTEST_SKIP() << "no AVX512-BF16";
  uint64_t seed = 900;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Activation act : {Activation::None, Activation::Gelu}) {
        check_case_bf16({33, 65, 131, ta, tb, true, act}, seed++);
        check_case_bf16({7, 33, 1601, ta, tb, false, act}, seed++);
      }
}

TEST(CpuPackedGemmBf16, SameBitsOnOneTwoAndThreeThreads) {
  if (!cpu::packed_bf16_available()) GTEST_SKIP() << "no AVX512-BF16";
  const Case c{301, 389, 1601, false, true, true, Activation::Gelu};
  const auto a = quantize(random_floats(size_t(c.m * (c.k + 1)), 950), DType::BF16);
  const auto b = quantize(random_floats(size_t(c.n * (c.k + 2)), 951), DType::BF16);
  const auto bias = random_floats(size_t(c.n), 952);
  const auto one = run_packed_bf16(c, 1, a, b, bias);
  for (int threads : {2, 3}) {
    const auto got = run_packed_bf16(c, threads, a, b, bias);
    ASSERT_EQ(got.size(), one.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &one[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << threads << " threads";
  }
}

// x [m, k] @ w^T (w a param [n, k], as a Linear layer stores it) + bias -> out.
struct LinearSchedule {
  int64_t m, n, k;
  Schedule s;
  explicit LinearSchedule(int64_t m_, int64_t n_, int64_t k_, bool weight_is_input = false) : m(m_), n(n_), k(k_) {
    const uint64_t w_off = 256, b_off = w_off + uint64_t(n * k * 4 + 255) / 256 * 256;
    const uint64_t x_off = b_off + uint64_t(n * 4 + 255) / 256 * 256;
    const uint64_t out_off = x_off + uint64_t(m * k * 4 + 255) / 256 * 256;
    s.arena_bytes = out_off + uint64_t(m * n * 4 + 255) / 256 * 256;
    MatMulParams mm{};
    mm.a = x_off, mm.b = w_off, mm.bias = b_off, mm.out = out_off;
    mm.batch = 1, mm.m = m, mm.n = n, mm.k = k, mm.lda = k, mm.ldb = k, mm.ldc = n;
    mm.dtype = DType::F32, mm.act = Activation::Gelu, mm.trans_b = 1;
    Thunk t;
    t.params = mm;
    t.label = "matmul 'linear'";
    s.thunks.push_back(t);
    auto bind = [](const std::string& name, uint64_t off, Shape shape) {
      Binding b;
      b.name = name, b.shape = shape, b.offset = off, b.inner_bytes = uint64_t(numel(shape)) * 4;
      b.outer_stride_bytes = b.inner_bytes;
      return b;
    };
    s.input_bindings = {bind("x", x_off, {m, k})};
    (weight_is_input ? s.input_bindings : s.param_bindings).push_back(bind("w", w_off, {n, k}));
    s.param_bindings.push_back(bind("bias", b_off, {n}));
    s.output_bindings = {bind("out", out_off, {m, n})};
  }
  std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>& bias) const {
    std::vector<double> ref;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = bias[size_t(j)];
        for (int64_t kk = 0; kk < k; ++kk) acc += double(x[size_t(i * k + kk)]) * w[size_t(j * k + kk)];
        ref.push_back(ref_activation(Activation::Gelu, acc));
      }
    return ref;
  }
};

const Binding& binding(const std::vector<Binding>& bs, const std::string& name) {
  for (const Binding& b : bs)
    if (b.name == name) return b;
  throw Error("no binding " + name);
}

TEST(CpuPackedGemm, WeightWrittenAfterARunIsSeenByTheNext) {
  if (!cpu::packed_gemm_available()) GTEST_SKIP() << "no AVX-512F";
  ASSERT_EQ(std::getenv("RLX_CPU_GEMM"), nullptr) << "the test checks the default choice";
  LinearSchedule l(33, 67, 130);
  auto exe = cpu_backend().prepare(l.s, CompileOptions{});
  const auto bias = random_floats(size_t(l.n), 700);
  exe->write_binding(binding(l.s.param_bindings, "bias"), bias.data());
  const auto x = random_floats(size_t(l.m * l.k), 701);
  for (uint64_t seed : {702, 703}) {  // a new weight each time, written after the previous run
    const auto w = random_floats(size_t(l.n * l.k), seed);
    exe->write_binding(binding(l.s.param_bindings, "w"), w.data());
    for (int rerun = 0; rerun < 2; ++rerun) {
      std::vector<float> out(size_t(l.m * l.n), kNaN);
      exe->run({x.data()}, {out.data()});
      expect_close(out, l.reference(x, w, bias), 1e-5, "run with weight " + std::to_string(seed));
    }
  }
  const cpu::CpuMatmulRuns runs = cpu::matmul_runs(*exe);
  EXPECT_EQ(runs.packed, 4u);
  EXPECT_EQ(runs.library, 0u);
  EXPECT_EQ(runs.packs_made, 2u) << "one packing per weight written, none for a rerun";
}

TEST(CpuPackedGemm, WeightWrittenThroughAnotherExecutableOnTheArenaIsSeen) {
  if (!cpu::packed_gemm_available()) GTEST_SKIP() << "no AVX-512F";
  ASSERT_EQ(std::getenv("RLX_CPU_GEMM"), nullptr) << "the test checks the default choice";
  LinearSchedule l(7, 33, 40);
  CompileOptions o;
  o.arena_share = make_arena_share();
  auto first = cpu_backend().prepare(l.s, o), second = cpu_backend().prepare(l.s, o);
  const auto bias = random_floats(size_t(l.n), 710), x = random_floats(size_t(l.m * l.k), 711);
  first->write_binding(binding(l.s.param_bindings, "bias"), bias.data());
  for (uint64_t seed : {712, 713}) {
    const auto w = random_floats(size_t(l.n * l.k), seed);
    first->write_binding(binding(l.s.param_bindings, "w"), w.data());
    std::vector<float> out(size_t(l.m * l.n), kNaN);
    second->run({x.data()}, {out.data()});
    expect_close(out, l.reference(x, w, bias), 1e-5, "second executable, weight " + std::to_string(seed));
  }
  EXPECT_EQ(cpu::matmul_runs(*second).packed, 2u);
}

TEST(CpuPackedGemm, OperandThatIsNotAWeightGoesThroughTheLibrary) {
  LinearSchedule l(7, 33, 40, /*weight_is_input=*/true);
  auto exe = cpu_backend().prepare(l.s, CompileOptions{});
  const auto bias = random_floats(size_t(l.n), 720), x = random_floats(size_t(l.m * l.k), 721);
  const auto w = random_floats(size_t(l.n * l.k), 722);
  exe->write_binding(binding(l.s.param_bindings, "bias"), bias.data());
  std::vector<float> out(size_t(l.m * l.n), kNaN);
  exe->run({x.data(), w.data()}, {out.data()});
  expect_close(out, l.reference(x, w, bias), 1e-5, "weight as an input");
  const cpu::CpuMatmulRuns runs = cpu::matmul_runs(*exe);
  EXPECT_EQ(runs.packed, 0u);
  EXPECT_EQ(runs.library, 1u);
}

// The real model: every product takes the path its row count calls for
// (packed weights up to 256 rows, the library above), as the counters of
// the runs say, and the hidden states are finite and not all zero.
TEST(CpuPackedGemm, MiniLmProductsTakeThePathTheirRowCountCallsFor) {
  if (!cpu::packed_gemm_available()) GTEST_SKIP() << "no AVX-512F";
  ASSERT_EQ(std::getenv("RLX_CPU_GEMM"), nullptr) << "the test checks the default choice";
  ASSERT_TRUE(minilm_present());
  // Past 256 rows the library, where it runs its AVX-512 kernels here.
  const bool library_past_256 = cpu::gemm_library_avx512();
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 32}, {3, 100}}) {
    SCOPED_TRACE(testing::Message() << "batch " << batch << " seq " << seq);
    BertLoadOptions o;
    o.batch = batch, o.seq = seq, o.threads = 2;
    auto exe = load_bert(minilm_dir(), o);
    uint64_t small = 0, large = 0;
    for (const Thunk& t : exe->schedule().thunks)
      if (const auto* p = std::get_if<MatMulParams>(&t.params))
        (p->m <= 256 || !library_past_256 ? small : large) += uint64_t(p->batch);
    ASSERT_GT(small + large, 0u);
    std::vector<int32_t> ids(size_t(batch * seq)), mask(ids.size(), 1), types(ids.size(), 0);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(1000 + (i * 7919) % 20000);
    auto out = exe->run({{"input_ids", HostTensor::from_i32({batch, seq}, ids)},
                         {"attention_mask", HostTensor::from_i32({batch, seq}, mask)},
                         {"token_type_ids", HostTensor::from_i32({batch, seq}, types)}});
    const auto h = out.at("last_hidden_state").to_f32();
    double max_abs = 0;
    for (float x : h) {
      ASSERT_TRUE(std::isfinite(x));
      max_abs = std::max(max_abs, double(std::fabs(x)));
    }
    EXPECT_GT(max_abs, 0.1);
    const cpu::CpuMatmulRuns runs = cpu::matmul_runs(exe->backend());
    EXPECT_EQ(runs.packed, small);
    EXPECT_EQ(runs.library, large);
    if (seq == 32) EXPECT_EQ(large, 0u) << "32 rows: every product on packed weights";
    if (seq == 100) EXPECT_EQ(large > 0, library_past_256) << "300 rows: the encoder's products through the library";
  }
}


// MiniLM in bf16 where the processor has AVX512-BF16: every product takes
// the bf16 kernel whatever its row count (300 rows included), and the
// hidden states stay within bf16's reach of the f32 model's (cosine per
// token).
TEST(CpuPackedGemmBf16, MiniLmInBf16TakesTheBf16KernelAtEveryRowCount) {
  if (!cpu::packed_bf16_available()) GTEST_SKIP() << "no AVX512-BF16";
  ASSERT_EQ(std::getenv("RLX_CPU_GEMM"), nullptr) << "the test checks the default choice";
  ASSERT_TRUE(minilm_present());
  const int64_t batch = 3, seq = 100;
  std::vector<int32_t> ids(size_t(batch * seq)), mask(ids.size(), 1), types(ids.size(), 0);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(1000 + (i * 7919) % 20000);
  std::vector<float> hidden[2];
  for (DType dt : {DType::F32, DType::BF16}) {
    BertLoadOptions o;
    o.batch = batch, o.seq = seq, o.threads = 2, o.dtype = dt;
    auto exe = load_bert(minilm_dir(), o);
    uint64_t products = 0;
    for (const Thunk& t : exe->schedule().thunks)
      if (const auto* p = std::get_if<MatMulParams>(&t.params)) products += uint64_t(p->batch);
    auto out = exe->run({{"input_ids", HostTensor::from_i32({batch, seq}, ids)},
                         {"attention_mask", HostTensor::from_i32({batch, seq}, mask)},
                         {"token_type_ids", HostTensor::from_i32({batch, seq}, types)}});
    hidden[dt == DType::BF16] = out.at("last_hidden_state").to_f32();
    const cpu::CpuMatmulRuns runs = cpu::matmul_runs(exe->backend());
    if (dt == DType::BF16) {
      EXPECT_EQ(runs.packed_bf16, products);
      EXPECT_EQ(runs.packed + runs.library, 0u);
    } else {
      EXPECT_EQ(runs.packed_bf16, 0u) << "f32 weights never take the bf16 kernel";
    }
  }
  ASSERT_EQ(hidden[0].size(), hidden[1].size());
  const size_t dim = hidden[0].size() / size_t(batch * seq);
  double worst = 1.0;
  for (size_t t = 0; t < size_t(batch * seq); ++t) {
    double dot = 0, n0 = 0, n1 = 0;
    for (size_t d = 0; d < dim; ++d) {
      const double x = hidden[0][t * dim + d], y = hidden[1][t * dim + d];
      ASSERT_TRUE(std::isfinite(y));
      dot += x * y, n0 += x * x, n1 += y * y;
    }
    worst = std::min(worst, dot / std::sqrt(n0 * n1));
  }
  EXPECT_GT(worst, 0.99) << "worst per-token cosine of bf16 against f32";
}


// Asked for int8 products, a weight's product runs the int8 kernel (and
// only then), within int8's reach of the f32 product; a weight written
// after a run is quantized again for the next.
TEST(CpuPackedGemmInt8, LinearRunsInt8OnlyWhenAskedAndSeesANewWeight) {
  if (!cpu::packed_int8_available()) GTEST_SKIP() << "no AVX512-VNNI";
  ASSERT_EQ(std::getenv("RLX_CPU_GEMM"), nullptr) << "the test checks the default choice";
  LinearSchedule l(33, 67, 130);
  const auto bias = random_floats(size_t(l.n), 730), x = random_floats(size_t(l.m * l.k), 731);
  for (bool int8 : {false, true}) {
    SCOPED_TRACE(int8 ? "int8" : "f32");
    CompileOptions o;
    o.int8_products = int8;
    auto exe = cpu_backend().prepare(l.s, o);
    exe->write_binding(binding(l.s.param_bindings, "bias"), bias.data());
    for (uint64_t seed : {732, 733}) {
      const auto w = random_floats(size_t(l.n * l.k), seed);
      exe->write_binding(binding(l.s.param_bindings, "w"), w.data());
      std::vector<float> out(size_t(l.m * l.n), kNaN);
      exe->run({x.data()}, {out.data()});
      // Uniform values: each product's quantization error is ~1e-3 of its size.
      expect_close(out, l.reference(x, w, bias), int8 ? 1e-2 : 1e-5, "weight " + std::to_string(seed));
      if (int8) {
        const auto ref = l.reference(x, w, bias);
        double worst = 0;
        for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
        EXPECT_GT(worst, 1e-6) << "exactly the f32 product: the int8 kernel did not run";
      }
    }
    const cpu::CpuMatmulRuns runs = cpu::matmul_runs(*exe);
    EXPECT_EQ(runs.packed_int8, int8 ? 2u : 0u);
    EXPECT_EQ(runs.packed, int8 ? 0u : 2u);
    EXPECT_EQ(runs.packs_made, 2u) << "one packing per weight written";
  }
}

// MiniLM with int8 products, in f32 and in bf16: every product takes the
// int8 kernel whatever its row count, and the hidden states stay within
// int8's reach of the f32 model's (cosine per token).
TEST(CpuPackedGemmInt8, MiniLmWithInt8ProductsTakesTheInt8KernelEverywhere) {
  if (!cpu::packed_int8_available()) GTEST_SKIP() << "no AVX512-VNNI";
  ASSERT_EQ(std::getenv("RLX_CPU_GEMM"), nullptr) << "the test checks the default choice";
  ASSERT_TRUE(minilm_present());
  const int64_t batch = 3, seq = 100;
  std::vector<int32_t> ids(size_t(batch * seq)), mask(ids.size(), 1), types(ids.size(), 0);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(1000 + (i * 7919) % 20000);
  auto hidden_of = [&](DType dt, bool int8) {
    BertLoadOptions o;
    o.batch = batch, o.seq = seq, o.threads = 2, o.dtype = dt, o.int8_products = int8;
    auto exe = load_bert(minilm_dir(), o);
    uint64_t products = 0;
    for (const Thunk& t : exe->schedule().thunks)
      if (const auto* p = std::get_if<MatMulParams>(&t.params)) products += uint64_t(p->batch);
    auto out = exe->run({{"input_ids", HostTensor::from_i32({batch, seq}, ids)},
                         {"attention_mask", HostTensor::from_i32({batch, seq}, mask)},
                         {"token_type_ids", HostTensor::from_i32({batch, seq}, types)}});
    const cpu::CpuMatmulRuns runs = cpu::matmul_runs(exe->backend());
    if (int8) {
      EXPECT_GT(products, 0u);
      EXPECT_EQ(runs.packed_int8, products) << dtype_name(dt);
      EXPECT_EQ(runs.packed + runs.packed_bf16 + runs.library, 0u) << dtype_name(dt);
    } else {
      EXPECT_EQ(runs.packed_int8, 0u);
    }
    return out.at("last_hidden_state").to_f32();
  };
  const std::vector<float> f32 = hidden_of(DType::F32, false);
  const size_t dim = f32.size() / size_t(batch * seq);
  auto cosine = [&](const std::vector<double>& x, const std::vector<double>& y) {
    double dot = 0, n0 = 0, n1 = 0;
    for (size_t d = 0; d < x.size(); ++d) dot += x[d] * y[d], n0 += x[d] * x[d], n1 += y[d] * y[d];
    return dot / std::sqrt(n0 * n1);
  };
  for (DType dt : {DType::F32, DType::BF16}) {
    const std::vector<float> q = hidden_of(dt, true);
    ASSERT_EQ(q.size(), f32.size());
    double worst_token = 1.0, worst_pooled = 1.0;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> pooled_f32(dim), pooled_q(dim);
      for (int64_t s = 0; s < seq; ++s) {
        const size_t t = size_t(b * seq + s);
        std::vector<double> x(dim), y(dim);
        for (size_t d = 0; d < dim; ++d) {
          ASSERT_TRUE(std::isfinite(q[t * dim + d]));
          x[d] = f32[t * dim + d], y[d] = q[t * dim + d];
          pooled_f32[d] += x[d], pooled_q[d] += y[d];
        }
        worst_token = std::min(worst_token, cosine(x, y));
      }
      worst_pooled = std::min(worst_pooled, cosine(pooled_f32, pooled_q));
    }
    // Per token, int8's error shows most on the few tokens with outlier
    // features (ONNX Runtime's own int8: 0.978 on its parity check); the
    // mean-pooled sentence vector is what an embedding is.
    EXPECT_GT(worst_token, 0.98) << "worst per-token cosine of int8 products (" << dtype_name(dt) << ") against f32";
    EXPECT_GT(worst_pooled, 0.99) << "worst mean-pooled cosine (" << dtype_name(dt) << ") against f32";
    EXPECT_LT(worst_token, 0.99999) << "int8 products as close as f32's own: the int8 kernel did not run";
  }
}

}  // namespace
}  // namespace rlx::test
