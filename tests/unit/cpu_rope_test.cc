// CPU rotary-embedding thunk vs a double-precision reference: half-split and
// interleaved layouts, partial rotation (n_rot < head_dim), strided rows,
// batched and shared positions, in f32/f16/bf16.
#include <gtest/gtest.h>

#include "thunk_harness.h"

namespace rlx::test {
namespace {

struct RopeCase {
  int64_t batch, seq;
  int32_t heads, head_dim, n_rot;
  bool interleaved, pos_batched;
  int64_t offset = 0, pad = 0;
};

void run_rope(const RopeCase& c, DType dt, uint64_t seed) {
  RopeParams p{};
  p.batch = c.batch, p.seq = c.seq, p.offset = c.offset;
  p.stride = c.offset + c.heads * c.head_dim + c.pad;
  p.heads = c.heads, p.head_dim = c.head_dim, p.n_rot = c.n_rot;
  p.theta = 10000.f;
  p.interleaved = c.interleaved, p.pos_batched = c.pos_batched;
  p.dtype = dt;
  auto x = quantize(random_floats(size_t(c.batch * c.seq * p.stride), seed), dt);
  auto pos = random_ints(size_t(c.pos_batched ? c.batch * c.seq : c.seq), seed + 1, 0, 4095);
  ThunkHarness h;
  p.x = h.input_f32("x", x, dt);
  p.pos = h.input_i32("pos", pos);
  p.out = h.output("out", dt, size_t(c.batch * c.seq * c.heads * c.head_dim));
  h.run(p, cpu_backend());

  std::vector<double> ref(size_t(c.batch * c.seq * c.heads * c.head_dim));
  const int64_t half = c.n_rot / 2;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < c.seq; ++s) {
      const double position = pos[size_t(c.pos_batched ? b * c.seq + s : s)];
      for (int64_t hh = 0; hh < c.heads; ++hh) {
        const float* xh = &x[size_t((b * c.seq + s) * p.stride + c.offset + hh * c.head_dim)];
        double* o = &ref[size_t(((b * c.seq + s) * c.heads + hh) * c.head_dim)];
        for (int64_t d = 0; d < c.head_dim; ++d) o[d] = xh[d];  // dims >= n_rot pass through
        for (int64_t i = 0; i < half; ++i) {
          const double inv_freq = std::pow(10000.0, -2.0 * double(i) / double(c.n_rot));
          const double cs = std::cos(position * inv_freq), sn = std::sin(position * inv_freq);
          const int64_t d0 = c.interleaved ? 2 * i : i, d1 = c.interleaved ? 2 * i + 1 : i + half;
          o[d0] = xh[d0] * cs - xh[d1] * sn;
          o[d1] = xh[d1] * cs + xh[d0] * sn;
        }
      }
    }
  expect_close(h.result("out"), ref, tolerance(dt),
               std::string("rope ") + (c.interleaved ? "interleaved" : "half-split") + " n_rot " +
                   std::to_string(c.n_rot) + " of " + std::to_string(c.head_dim));
}

class CpuRope : public ::testing::TestWithParam<DType> {};

TEST_P(CpuRope, FullRotationBothLayouts) {
  for (bool interleaved : {false, true}) {
    run_rope({2, 7, 3, 16, 16, interleaved, true}, GetParam(), 900);
    run_rope({1, 1, 1, 2, 2, interleaved, false}, GetParam(), 901);
    run_rope({2, 33, 4, 64, 64, interleaved, true}, GetParam(), 902);  // threaded
  }
}

TEST_P(CpuRope, PartialRotationCopiesTail) {
  for (bool interleaved : {false, true}) {
    run_rope({2, 5, 2, 32, 8, interleaved, true}, GetParam(), 910);
    run_rope({1, 9, 3, 33, 10, interleaved, false}, GetParam(), 911);  // odd head_dim
  }
}

TEST_P(CpuRope, SharedPositionsAcrossBatch) {
  for (bool interleaved : {false, true}) run_rope({3, 7, 2, 16, 16, interleaved, false}, GetParam(), 920);
}

TEST_P(CpuRope, StridedRowsFromFusedQkv) {
  for (bool interleaved : {false, true}) {
    RopeCase c{2, 7, 4, 16, 12, interleaved, true};
    c.offset = 64, c.pad = 40;  // k heads of a [q | k | v] row
    run_rope(c, GetParam(), 930);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuRope, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace rlx::test
