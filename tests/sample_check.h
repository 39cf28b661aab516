// Running the sample op on a backend for the CPU and GPU suites: one graph
// [rows, vocab] -> i32 [rows] with its positions as an input, the output
// poisoned in the arena before the run; and random normal logits.
#pragma once
#include <random>
#include <vector>

#include "backends/backend.h"
#include "rlx/graph.h"
#include "rlx/session.h"
#include "test_util.h"

namespace rlx::test {

// Normal logits (sd `scale`), rounded to dt: draws rarely tie.
inline std::vector<float> normal_logits(size_t n, uint64_t seed, float scale, DType dt) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return quantize(v, dt);
}

// The token of each row of x [rows, vocab] at its position.
inline std::vector<int32_t> run_sample_op(Device device, DType dt, const std::vector<float>& x, int64_t vocab,
                                          const std::vector<int32_t>& positions, const SampleAttrs& a,
                                          ExecMode mode = ExecMode::Auto) {
  const int64_t rows = int64_t(positions.size());
  Graph g;
  ValueId xv = g.input("x", {rows, vocab}, dt);
  ValueId pv = g.input("positions", {rows}, DType::I32);
  g.output("token", g.sample(xv, pv, a));
  CompileOptions o;
  o.device = device;
  o.threads = 1;
  o.mode = mode;
  o.verify_plan = true;
  auto exe = compile(g, o);
  EXPECT_EQ(exe->report().thunk_histogram.count("sample"), 1u);
  for (const Binding& b : exe->schedule().output_bindings)
    exe->backend().write_binding(b, nan_bytes(size_t(numel(b.shape)), b.dtype).data());
  return exe->run({{"x", HostTensor::from_f32({rows, vocab}, x, dt)}, {"positions", HostTensor::from_i32({rows}, positions)}})
      .at("token")
      .to_i32();
}

}  // namespace rlx::test
