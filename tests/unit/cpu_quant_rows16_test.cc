// matmul_q's weights interleaved 16 rows at a time on AVX512-VNNI
// (cpu_quant_rows16.h): the layout's round trip and block reads; products
// through compiled graphs (weights as params, so the kernel interleaves
// them in the arena) against the dequantized product in double at odd
// sizes, with the path asserted by its counter; each row of a batch the
// bits of that row alone; the weights put back for a kernel that reads
// rows, rewritten by set_param, and gathered from (a tied embedding) while
// interleaved.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_quant_dot.h"
#include "backends/cpu/cpu_quant_rows16.h"
#include "cpu_quant_kernel_scope.h"
#include "quant_weights.h"
#include "rlx/session.h"
#include "thunk_harness.h"

namespace rlx {
namespace {

using test::QuantWeight;
constexpr QuantType kTypes[] = {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1};

#define SKIP_WITHOUT_VNNI() \
  if (!cpu::quant_kernel_runs(cpu::QuantKernel::Avx512Vnni)) GTEST_SKIP() << "no AVX512-VNNI here"

std::unique_ptr<Executable> product_exe(const QuantWeight& w, int64_t m) {
  Graph g;
  ValueId x = g.input("x", {m, w.k}, DType::F32);
  ValueId q = g.param("w.quants", w.quants_shape(), DType::I32), s = g.param("w.scales", w.scales_shape(), DType::F16);
  g.output("out", g.matmul_q(x, q, s, w.type));
  auto exe = compile(g, CompileOptions{});
  exe->set_param("w.quants", HostTensor{DType::I32, w.quants_shape(), w.quants});
  exe->set_param("w.scales", HostTensor{DType::F16, w.scales_shape(), w.scales});
  return exe;
}

std::vector<float> run(Executable& exe, const std::vector<float>& x, int64_t m, int64_t k) {
  return exe.run({{"x", HostTensor::from_f32({m, k}, x)}}).at("out").to_f32();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CpuQuantRows16, LayoutRoundTripsAndEachBlockReadsBack) {
  for (QuantType t : kTypes) {
    const int64_t n = 37, k = 5 * kQuantBlock, blocks = k / kQuantBlock;
    const QuantWeight w = test::random_quant_weight(t, n, k, 4100);
    std::vector<uint8_t> q = w.quants;
    std::vector<uint16_t> s(w.scales.size() / 2);
    std::memcpy(s.data(), w.scales.data(), w.scales.size());
    const std::vector<uint16_t> s0 = s;
    cpu::pack_rows16(t, q.data(), s.data(), n, k);
    const int64_t row_bytes = blocks * quant_block_bytes(t), per = quant_scales_per_block(t);
    const int64_t n16 = cpu::rows16_rows(n);
    ASSERT_EQ(n16, 32);
    EXPECT_NE(std::memcmp(q.data(), w.quants.data(), size_t(n16 * row_bytes)), 0) << quant_type_name(t);
    // The last n % 16 rows keep the row layout.
    EXPECT_EQ(std::memcmp(q.data() + n16 * row_bytes, w.quants.data() + n16 * row_bytes,
                          size_t((n - n16) * row_bytes)),
              0);
    for (int64_t r = 0; r < n16; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        uint8_t bq[32];
        uint16_t bs[2];
        cpu::rows16_block(t, q.data(), s.data(), k, r, b, bq, bs);
        EXPECT_EQ(std::memcmp(bq, w.quants.data() + r * row_bytes + b * quant_block_bytes(t),
                              size_t(quant_block_bytes(t))),
                  0)
            << quant_type_name(t) << " row " << r << " block " << b;
        for (int64_t c = 0; c < per; ++c) EXPECT_EQ(bs[c], s0[size_t((r * blocks + b) * per + c)]);
      }
    cpu::unpack_rows16(t, q.data(), s.data(), n, k);
    EXPECT_EQ(q, w.quants) << quant_type_name(t);
    EXPECT_EQ(s, s0) << quant_type_name(t);
  }
}

TEST(CpuQuantRows16, ProductAgainstTheDequantizedProductAtOddSizes) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(cpu::QuantKernel::Avx512Vnni);
  uint64_t seed = 4200;
  for (QuantType t : kTypes)
    for (int64_t blocks : {1, 3, 18})
      for (int64_t m : {1, 2, 7, 16, 21})
        for (int64_t n : {16, 37, 64}) {
          const int64_t k = blocks * kQuantBlock;
          const std::string what = std::string(quant_type_name(t)) + " m=" + std::to_string(m) +
                                   " n=" + std::to_string(n) + " k=" + std::to_string(k);
          const QuantWeight w = test::random_quant_weight(t, n, k, seed += 10);
          const std::vector<float> x = test::random_floats(size_t(m * k), seed + 1, -2.f, 2.f);
          auto exe = product_exe(w, m);
          const uint64_t before = cpu::rows16_calls();
          const std::vector<float> got = run(*exe, x, m, k);
          EXPECT_EQ(cpu::rows16_calls(), before + 1) << what << ": the interleaved path did not run";
          ASSERT_EQ(got.size(), size_t(m * n)) << what;
          size_t bad = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t r = 0; r < n; ++r) {
              double want = 0;
              const double bound = test::two_digit_bound(x, w, i, r, &want);
              const float v = got[size_t(i * n + r)];
              if (!(std::fabs(v - want) <= bound) && bad++ == 0)
                ADD_FAILURE() << what << ": row " << i << " col " << r << " got " << v << " want " << want
                              << " within " << bound;
            }
          EXPECT_EQ(bad, 0u) << what;
          // A second run reads the weights already interleaved.
          EXPECT_TRUE(same_bits(run(*exe, x, m, k), got)) << what;
        }
}

// Through the thunk with NaN-poisoned outputs: every output of every group
// and of the rows past them is written (1 and 19 rows of x, the tail of 5
// weight rows).
TEST(CpuQuantRows16, EveryOutputIsWritten) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(cpu::QuantKernel::Avx512Vnni);
  for (QuantType t : kTypes)
    for (int64_t m : {1, 19}) {
      const int64_t n = 53, k = 2 * kQuantBlock;
      const QuantWeight w = test::random_quant_weight(t, n, k, 4250);
      const std::vector<float> x = test::random_floats(size_t(m * k), 4251);
      test::ThunkHarness h;
      MatMulQParams p{};
      p.x = h.input_f32("x", x, DType::F32);
      p.quants = h.input("quants", DType::I32, w.quants);
      p.scales = h.input("scales", DType::F16, w.scales);
      p.bias = kNoBuffer;
      p.out = h.output("out", DType::F32, size_t(m * n));  // NaN-poisoned
      p.dequantized = kNoBuffer;
      p.m = m, p.n = n, p.k = k;
      p.dtype = DType::F32;
      p.quant = t;
      p.weights_constant = 1;
      const uint64_t before = cpu::rows16_calls();
      h.run(p, cpu_backend());
      EXPECT_EQ(cpu::rows16_calls(), before + 1);
      const std::vector<float> got = h.result("out");
      for (int64_t i = 0; i < m; ++i)
        for (int64_t r = 0; r < n; ++r) {
          double want = 0;
          const double bound = test::two_digit_bound(x, w, i, r, &want);
          EXPECT_LE(std::fabs(got[size_t(i * n + r)] - want), bound) << quant_type_name(t) << " " << i << ", " << r;
        }
    }
}

// A sequence gets the same bits in a prompt or a batch as in a decode step
// of its own.
TEST(CpuQuantRows16, EachRowOfABatchIsTheBitsOfThatRowAlone) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(cpu::QuantKernel::Avx512Vnni);
  for (QuantType t : kTypes) {
    const int64_t m = 29, n = 45, k = 18 * kQuantBlock;
    const QuantWeight w = test::random_quant_weight(t, n, k, 4300);
    std::vector<float> x = test::random_floats(size_t(m * k), 4301, -3.f, 3.f);
    for (int64_t j = 0; j < k; ++j) x[size_t(5 * k + j)] *= 1e3f;  // rows of other magnitudes
    for (int64_t j = 0; j < k; ++j) x[size_t(6 * k + j)] *= 1e-3f;
    x[size_t(9 * k + 70)] = NAN;  // reaches row 9 only
    auto all_exe = product_exe(w, m);
    auto one_exe = product_exe(w, 1);
    const std::vector<float> all = run(*all_exe, x, m, k);
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
      const std::vector<float> alone = run(*one_exe, row, 1, k);
      EXPECT_EQ(std::memcmp(alone.data(), all.data() + i * n, size_t(n) * sizeof(float)), 0)
          << quant_type_name(t) << ": row " << i << " differs from itself alone";
      for (int64_t r = 0; r < n; ++r) EXPECT_EQ(std::isnan(alone[size_t(r)]), i == 9) << i << ", " << r;
    }
  }
}

// Another kernel on the same executable reads rows: the weights are put
// back first, and interleaved again when the VNNI kernel returns.
TEST(CpuQuantRows16, OtherKernelsReadTheRowLayoutAgain) {
  SKIP_WITHOUT_VNNI();
  for (QuantType t : kTypes) {
    const int64_t m = 3, n = 40, k = 7 * kQuantBlock;
    const QuantWeight w = test::random_quant_weight(t, n, k, 4400);
    const std::vector<float> x = test::random_floats(size_t(m * k), 4401);
    std::vector<float> scalar_fresh, vnni_fresh;
    {
      const test::QuantKernelScope scope(cpu::QuantKernel::Scalar);
      scalar_fresh = run(*product_exe(w, m), x, m, k);
    }
    auto exe = product_exe(w, m);
    {
      const test::QuantKernelScope scope(cpu::QuantKernel::Avx512Vnni);
      vnni_fresh = run(*exe, x, m, k);
    }
    {
      const test::QuantKernelScope scope(cpu::QuantKernel::Scalar);
      EXPECT_TRUE(same_bits(run(*exe, x, m, k), scalar_fresh)) << quant_type_name(t);
    }
    const test::QuantKernelScope scope(cpu::QuantKernel::Avx512Vnni);
    EXPECT_TRUE(same_bits(run(*exe, x, m, k), vnni_fresh)) << quant_type_name(t);
  }
}

// New weights written over interleaved ones take effect, whole or in part.
TEST(CpuQuantRows16, SetParamOverInterleavedWeights) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(cpu::QuantKernel::Avx512Vnni);
  for (QuantType t : kTypes) {
    const int64_t m = 2, n = 33, k = 3 * kQuantBlock;
    const QuantWeight a = test::random_quant_weight(t, n, k, 4500), b = test::random_quant_weight(t, n, k, 4510);
    const std::vector<float> x = test::random_floats(size_t(m * k), 4501);
    auto exe = product_exe(a, m);
    run(*exe, x, m, k);
    // Only the quants change: b's quants with a's scales.
    QuantWeight mixed = a;
    mixed.quants = b.quants;
    exe->set_param("w.quants", HostTensor{DType::I32, b.quants_shape(), b.quants});
    EXPECT_TRUE(same_bits(run(*exe, x, m, k), run(*product_exe(mixed, m), x, m, k))) << quant_type_name(t);
    exe->set_param("w.scales", HostTensor{DType::F16, b.scales_shape(), b.scales});
    EXPECT_TRUE(same_bits(run(*exe, x, m, k), run(*product_exe(b, m), x, m, k))) << quant_type_name(t);
  }
}

// A tied embedding: the table gather_q reads is the head's weight, which
// the head's product interleaves; the rows gathered stay the dequantized
// rows exactly (interleaved rows and the rows past them).
TEST(CpuQuantRows16, GatherFromAnInterleavedTable) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(cpu::QuantKernel::Avx512Vnni);
  for (QuantType t : kTypes) {
    const int64_t vocab = 51, dim = 4 * kQuantBlock;
    const QuantWeight w = test::random_quant_weight(t, vocab, dim, 4600);
    Graph g;
    ValueId q = g.param("w.quants", w.quants_shape(), DType::I32), s = g.param("w.scales", w.scales_shape(), DType::F16);
    ValueId ids = g.input("ids", {5}, DType::I32);
    ValueId x = g.input("x", {1, dim}, DType::F32);
    g.output("rows", g.gather_q(q, s, ids, t, DType::F32));
    g.output("logits", g.matmul_q(x, q, s, t));
    auto exe = compile(g, CompileOptions{});
    exe->set_param("w.quants", HostTensor{DType::I32, w.quants_shape(), w.quants});
    exe->set_param("w.scales", HostTensor{DType::F16, w.scales_shape(), w.scales});
    const std::vector<int32_t> id{0, 17, 47, 50, 31};
    const std::vector<float> xv = test::random_floats(size_t(dim), 4601);
    const uint64_t before = cpu::rows16_calls();
    for (int pass = 0; pass < 3; ++pass) {
      const auto out = exe->run({{"ids", HostTensor::from_i32({5}, id)}, {"x", HostTensor::from_f32({1, dim}, xv)}});
      const std::vector<float> rows = out.at("rows").to_f32();
      ASSERT_EQ(rows.size(), size_t(5 * dim));
      for (size_t i = 0; i < id.size(); ++i)
        for (int64_t j = 0; j < dim; ++j) {
          const float want = w.values[size_t(id[i] * dim + j)];
          ASSERT_EQ(rows[i * size_t(dim) + size_t(j)], want)
              << quant_type_name(t) << " pass " << pass << " id " << id[i] << " value " << j;
        }
    }
    EXPECT_EQ(cpu::rows16_calls(), before + 3) << quant_type_name(t);
  }
}

}  // namespace
}  // namespace rlx
