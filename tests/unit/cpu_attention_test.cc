// CPU attention thunk vs a double-precision reference: GQA, causal with
// sq != skv, padding masks (a sequence with no kept key attends to every
// key; a causal row with no key gives zeros), strided rows and a
// fused QKV buffer, in f32/f16/bf16.
#include <gtest/gtest.h>

#include <algorithm>

#include "thunk_harness.h"

namespace rlx::test {
namespace {

struct AttnCase {
  int64_t batch, sq, skv;
  int32_t q_heads, kv_heads, head_dim;
  MaskKind mask;
  int64_t q_offset = 0, k_offset = 0, v_offset = 0;
  int64_t q_pad = 0, k_pad = 0, v_pad = 0;  // row stride beyond offset + heads*head_dim
};

struct AttnResult {
  std::vector<float> got;
  std::vector<double> ref;
};

// Reference attention over rows of q/k/v given as flat stored values.
std::vector<double> reference_attention(const AttentionParams& p, const std::vector<float>& q,
                                        const std::vector<float>& k, const std::vector<float>& v,
                                        const std::vector<int32_t>& mask) {
  const int64_t hd = p.head_dim;
  std::vector<double> out(size_t(p.batch * p.sq * p.q_heads * hd), 0.0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.q_heads; ++h)
      for (int64_t i = 0; i < p.sq; ++i) {
        const int64_t kvh = h / (p.q_heads / p.kv_heads);
        std::vector<double> s(size_t(p.skv));
        std::vector<bool> keep(size_t(p.skv), true);
        double mx = -1e300;
        const bool padded_out = p.mask_kind == MaskKind::Padding &&
                                std::all_of(mask.begin() + b * p.skv, mask.begin() + (b + 1) * p.skv,
                                            [](int32_t m) { return m == 0; });
        for (int64_t j = 0; j < p.skv; ++j) {
          if (p.mask_kind == MaskKind::Causal) keep[size_t(j)] = j <= i + p.skv - p.sq;
          if (p.mask_kind == MaskKind::Padding) keep[size_t(j)] = padded_out || mask[size_t(b * p.skv + j)] != 0;
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d)
            dot += double(q[size_t((b * p.sq + i) * p.q_stride + p.q_offset + h * hd + d)]) *
                   k[size_t((b * p.skv + j) * p.k_stride + p.k_offset + kvh * hd + d)];
          s[size_t(j)] = dot * p.scale;
          if (keep[size_t(j)]) mx = std::max(mx, s[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j < p.skv; ++j) sum += keep[size_t(j)] ? std::exp(s[size_t(j)] - mx) : 0.0;
        if (sum == 0) continue;  // fully masked row: zeros
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < p.skv; ++j)
            if (keep[size_t(j)])
              acc += std::exp(s[size_t(j)] - mx) * v[size_t((b * p.skv + j) * p.v_stride + p.v_offset + kvh * hd + d)];
          out[size_t(((b * p.sq + i) * p.q_heads + h) * hd + d)] = acc / sum;
        }
      }
  return out;
}

AttnResult run_attention(const AttnCase& c, DType dt, uint64_t seed, const std::vector<int32_t>& mask = {}) {
  AttentionParams p{};
  p.batch = c.batch, p.sq = c.sq, p.skv = c.skv;
  p.q_heads = c.q_heads, p.kv_heads = c.kv_heads, p.head_dim = c.head_dim;
  p.q_offset = c.q_offset, p.k_offset = c.k_offset, p.v_offset = c.v_offset;
  p.q_stride = c.q_offset + c.q_heads * c.head_dim + c.q_pad;
  p.k_stride = c.k_offset + c.kv_heads * c.head_dim + c.k_pad;
  p.v_stride = c.v_offset + c.kv_heads * c.head_dim + c.v_pad;
  p.scale = float(1.0 / std::sqrt(double(c.head_dim)));
  p.mask_kind = c.mask;
  p.dtype = dt;
  auto q = quantize(random_floats(size_t(c.batch * c.sq * p.q_stride), seed, -2.f, 2.f), dt);
  auto k = quantize(random_floats(size_t(c.batch * c.skv * p.k_stride), seed + 1, -2.f, 2.f), dt);
  auto v = quantize(random_floats(size_t(c.batch * c.skv * p.v_stride), seed + 2), dt);
  ThunkHarness h;
  p.q = h.input_f32("q", q, dt);
  p.k = h.input_f32("k", k, dt);
  p.v = h.input_f32("v", v, dt);
  p.mask = c.mask == MaskKind::Padding ? h.input_i32("mask", mask) : kNoBuffer;
  p.out = h.output("out", dt, size_t(c.batch * c.sq * c.q_heads * c.head_dim));
  h.run(p, cpu_backend());
  return {h.result("out"), reference_attention(p, q, k, v, mask)};
}

class CpuAttention : public ::testing::TestWithParam<DType> {};

TEST_P(CpuAttention, NoMask) {
  auto r = run_attention({2, 7, 7, 3, 3, 16, MaskKind::None}, GetParam(), 800);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention no mask");
  r = run_attention({1, 1, 1, 1, 1, 1, MaskKind::None}, GetParam(), 801);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention 1x1");
}

TEST_P(CpuAttention, GroupedQueryHeads) {
  auto r = run_attention({2, 9, 9, 6, 2, 33, MaskKind::None}, GetParam(), 810);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention gqa 6/2");
  r = run_attention({1, 5, 5, 4, 1, 8, MaskKind::Causal}, GetParam(), 811);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention mqa causal");
}

// One or two query rows (a decode step; f32 reads the cache in place, one
// task per key/value head): grouped heads, head_dim not a multiple of the
// vector width, keys not a multiple of the 16-key tile, every mask kind,
// strided rows.
TEST_P(CpuAttention, DecodeStepRowsWithGroupedHeads) {
  for (int64_t sq : {1, 2})
    for (MaskKind m : {MaskKind::None, MaskKind::Causal, MaskKind::Padding})
      for (auto [skv, hd] : {std::pair{37, 40}, {16, 64}, {3, 17}}) {
        AttnCase c{3, sq, skv, 6, 2, int32_t(hd), m};
        c.q_pad = 5, c.k_pad = 3, c.v_pad = 7;
        // Padding: sequence 0 keeps every third key, 1 all but the last, 2 none (attends to all).
        std::vector<int32_t> mask;
        if (m == MaskKind::Padding)
          for (int64_t b = 0; b < 3; ++b)
            for (int64_t j = 0; j < skv; ++j) mask.push_back(b == 0 ? j % 3 == 0 : b == 1 ? j + 1 < skv : 0);
        auto r = run_attention(c, GetParam(), 870 + uint64_t(skv * 3 + sq) + uint64_t(m), mask);
        expect_close(r.got, r.ref, tolerance(GetParam()),
                     "decode rows sq " + std::to_string(sq) + " skv " + std::to_string(skv) + " hd " +
                         std::to_string(hd) + " mask " + std::to_string(int(m)));
      }
}

TEST_P(CpuAttention, CausalAlignsLastQueryWithLastKey) {
  for (auto [sq, skv] : {std::pair{7, 7}, {3, 11}, {1, 33}}) {
    auto r = run_attention({2, sq, skv, 2, 2, 16, MaskKind::Causal}, GetParam(), 820 + uint64_t(skv));
    expect_close(r.got, r.ref, tolerance(GetParam()), "attention causal sq " + std::to_string(sq) + " skv " + std::to_string(skv));
  }
}

TEST_P(CpuAttention, CausalWithMoreQueriesThanKeysZeroesMaskedRows) {
  // sq > skv: query rows i < sq - skv see no key and must be zero, not NaN.
  auto r = run_attention({1, 7, 4, 2, 1, 8, MaskKind::Causal}, GetParam(), 830);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention causal sq > skv");
  for (size_t e = 0; e < size_t(3 * 2 * 8); ++e) EXPECT_EQ(r.got[e], 0.f) << "element " << e;
}

TEST_P(CpuAttention, PaddingMaskWithFullyPaddedBatchAttendsToEveryKey) {
  const int64_t batch = 3, skv = 9;
  std::vector<int32_t> mask(size_t(batch * skv), 1);
  for (int64_t j = 5; j < skv; ++j) mask[size_t(j)] = 0;                // batch 0: 5 real tokens
  for (int64_t j = 0; j < skv; ++j) mask[size_t(skv + j)] = 0;          // batch 1: all padding
  mask[size_t(2 * skv + 3)] = 0;                                       // batch 2: a hole
  auto r = run_attention({batch, 9, skv, 2, 2, 16, MaskKind::Padding}, GetParam(), 840, mask);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention padding");
  const size_t per_batch = size_t(9 * 2 * 16);
  size_t nonzero = 0;
  for (size_t e = per_batch; e < 2 * per_batch; ++e) nonzero += r.got[e] != 0.f;
  EXPECT_GT(nonzero, per_batch / 2) << "the fully padded batch must attend to every key, not give zeros";
}

TEST_P(CpuAttention, StridedRows) {
  AttnCase c{2, 5, 7, 4, 2, 16, MaskKind::Causal};
  c.q_offset = 3, c.k_offset = 16, c.v_offset = 5;
  c.q_pad = 7, c.k_pad = 1, c.v_pad = 32;
  auto r = run_attention(c, GetParam(), 850);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention strided");
}

TEST_P(CpuAttention, FusedQkvBuffer) {
  // One [batch, seq, (qh + 2 kvh) * hd] buffer, q/k/v at column offsets.
  const DType dt = GetParam();
  const int64_t batch = 2, seq = 7, hd = 16;
  const int32_t qh = 4, kvh = 2;
  const int64_t width = (qh + 2 * kvh) * hd;
  auto qkv = quantize(random_floats(size_t(batch * seq * width), 860, -2.f, 2.f), dt);
  AttentionParams p{};
  ThunkHarness h;
  p.q = p.k = p.v = h.input_f32("qkv", qkv, dt);
  p.mask = kNoBuffer;
  p.out = h.output("out", dt, size_t(batch * seq * qh * hd));
  p.batch = batch, p.sq = seq, p.skv = seq;
  p.q_offset = 0, p.k_offset = qh * hd, p.v_offset = (qh + kvh) * hd;
  p.q_stride = p.k_stride = p.v_stride = width;
  p.q_heads = qh, p.kv_heads = kvh, p.head_dim = int32_t(hd);
  p.scale = 0.25f;
  p.mask_kind = MaskKind::Causal;
  p.dtype = dt;
  h.run(p, cpu_backend());
  expect_close(h.result("out"), reference_attention(p, qkv, qkv, qkv, {}), tolerance(dt), "attention fused qkv");
}

// More query rows than one block of the blocked kernel (32), odd sizes, each
// mask kind: blocks after the first must see the right keys.
TEST_P(CpuAttention, ManyRowBlocksOddSizes) {
  auto r = run_attention({2, 77, 77, 3, 3, 40, MaskKind::None}, GetParam(), 850);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention 77 rows");
  r = run_attention({1, 69, 101, 4, 2, 24, MaskKind::Causal}, GetParam(), 851);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention causal 69 x 101");
  r = run_attention({1, 101, 69, 2, 1, 8, MaskKind::Causal}, GetParam(), 852);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention causal 101 x 69 (first rows see no key)");
  for (size_t e = 0; e < size_t(32 * 2 * 8); ++e) ASSERT_EQ(r.got[e], 0.f) << "element " << e;
  const int64_t batch = 2, skv = 65;
  std::vector<int32_t> mask(size_t(batch * skv), 1);
  for (int64_t j = 40; j < skv; ++j) mask[size_t(j)] = 0;
  for (int64_t j = 0; j < skv; j += 3) mask[size_t(skv + j)] = 0;
  r = run_attention({batch, skv, skv, 3, 3, 33, MaskKind::Padding}, GetParam(), 853, mask);
  expect_close(r.got, r.ref, tolerance(GetParam()), "attention padding 65");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuAttention, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace rlx::test
