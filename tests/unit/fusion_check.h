// Fused vs unfused: the same graph compiled with and without the fusion
// passes on the CPU must give the same outputs on the same random params and
// inputs. Used by every fusion's numeric test.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "rlx/session.h"
#include "test_util.h"

namespace rlx::test {

struct FusionRun {
  std::unique_ptr<Executable> unfused, fused;
  std::map<std::string, HostTensor> unfused_out, fused_out;
};

// Random values for every live param of g (uniform in [-1, 1], seeded by name).
inline std::map<std::string, HostTensor> random_params(const Graph& g, uint64_t seed) {
  std::map<std::string, HostTensor> params;
  uint64_t i = 0;
  for (const Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::Param) continue;
    const Value& v = g.value(n.outputs[0]);
    params[n.name] = HostTensor::from_f32(v.shape, random_floats(size_t(numel(v.shape)), seed + 7919 * ++i),
                                          v.dtype);
  }
  return params;
}

// Random float inputs for every input of g not already in `given`.
inline std::map<std::string, HostTensor> random_inputs(const Graph& g, uint64_t seed,
                                                       std::map<std::string, HostTensor> given = {}) {
  uint64_t i = 0;
  for (const Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::Input || given.count(n.name)) continue;
    const Value& v = g.value(n.outputs[0]);
    given[n.name] = HostTensor::from_f32(v.shape, random_floats(size_t(numel(v.shape)), seed + 104729 * ++i),
                                         v.dtype);
  }
  return given;
}

inline std::unique_ptr<Executable> compile_cpu(const Graph& g, bool fuse) {
  CompileOptions o;
  o.device = Device::Cpu;
  o.fuse = fuse;
  o.threads = 1;
  return compile(g, o);
}

// Compiles g both ways, runs both on the same data and expects every output
// to agree within rel_tol of its largest magnitude. The unfused result must
// itself be finite and not all zero, so two equally broken runs cannot pass.
inline FusionRun expect_fusion_preserves_outputs(const Graph& g, uint64_t seed,
                                                 std::map<std::string, HostTensor> given_inputs = {},
                                                 double rel_tol = 1e-5) {
  FusionRun r;
  r.unfused = compile_cpu(g, false);
  r.fused = compile_cpu(g, true);
  const auto params = random_params(g, seed);
  for (const auto& [name, t] : params) {
    r.unfused->set_param(name, t);
    r.fused->set_param(name, t);
  }
  const auto inputs = random_inputs(g, seed + 1, std::move(given_inputs));
  r.unfused_out = r.unfused->run(inputs);
  r.fused_out = r.fused->run(inputs);
  EXPECT_EQ(r.unfused_out.size(), g.outputs().size());
  EXPECT_EQ(r.fused_out.size(), g.outputs().size());
  for (const auto& [name, want] : r.unfused_out) {
    const auto it = r.fused_out.find(name);
    if (it == r.fused_out.end()) {
      ADD_FAILURE() << "fused run lacks output " << name;
      continue;
    }
    EXPECT_EQ(it->second.shape, want.shape) << name;
    EXPECT_EQ(it->second.dtype, want.dtype) << name;
    const std::vector<float> ref = want.to_f32();
    size_t nonfinite = 0, nonzero = 0;
    for (float v : ref) nonfinite += !std::isfinite(v), nonzero += v != 0.f;
    EXPECT_EQ(nonfinite, 0u) << name << ": the unfused output has NaN/inf";
    EXPECT_GT(nonzero, 0u) << name << ": the unfused output is all zero";
    expect_close(it->second.to_f32(), ref, rel_tol, "output " + name + " fused vs unfused");
  }
  return r;
}

inline int thunks_of(const Executable& e, const std::string& kind) {
  const auto& h = e.report().thunk_histogram;
  const auto it = h.find(kind);
  return it == h.end() ? 0 : it->second;
}

}  // namespace rlx::test
