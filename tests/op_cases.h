// One table of op cases for every backend (as ggml's test-backend-ops): each
// case builds a small graph at odd sizes with random inputs and computes a
// double-precision reference from those same inputs. The CPU suite checks the
// CPU backend against the reference (tests/unit/op_cases_test.cc); the GPU
// suite checks the CUDA backend against the CPU backend in every execution
// mode (tests/gpu/op_cases_test.cc). A new kind means a new case here.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "reference_ops.h"
#include "rlx/graph.h"
#include "rlx/session.h"
#include "test_util.h"

namespace rlx::test {

using Values = std::map<std::string, std::vector<float>>;  // per input, already rounded to its dtype

struct OpGraph {
  Graph graph;
  Values inputs;
};

struct OpCase {
  std::string name;
  std::string thunk;  // the thunk kind that must run (asserted from the schedule)
  std::function<OpGraph(DType)> build;
  std::function<std::map<std::string, std::vector<double>>(const Values&)> reference;
  double tol_scale = 1.0;  // times test::tolerance(dtype)
};

// Feeds for an executable from the case's input values.
inline std::map<std::string, HostTensor> feeds(const OpGraph& c) {
  std::map<std::string, HostTensor> f;
  for (const auto& [name, values] : c.inputs) {
    for (const Node& n : c.graph.nodes())
      if (n.op == OpKind::Input && n.name == name) {
        const Value& v = c.graph.value(n.outputs[0]);
        f[name] = HostTensor::from_f32(v.shape, values, v.dtype);
      }
  }
  return f;
}

inline std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;

  // silu(gate) * up on separate tensors: rows 3x5, 37 columns.
  cases.push_back({"swiglu", "swiglu",
                   [](DType dt) {
                     OpGraph c;
                     ValueId gate = c.graph.input("gate", {3, 5, 37}, dt);
                     ValueId up = c.graph.input("up", {3, 5, 37}, dt);
                     c.graph.output("out", c.graph.swiglu(gate, up));
                     c.inputs["gate"] = quantize(random_floats(3 * 5 * 37, 71, -4.f, 4.f), dt);
                     c.inputs["up"] = quantize(random_floats(3 * 5 * 37, 72, -2.f, 2.f), dt);
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     const auto &g = in.at("gate"), &u = in.at("up");
                     for (size_t i = 0; i < g.size(); ++i) out.push_back(ref_activation(Activation::Silu, g[i]) * u[i]);
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});

  // The decoder's form: both halves of one fused gate/up row [7, 2*45], read
  // at offsets 0 and 45 with a row stride of 90; output [7, 45].
  cases.push_back({"swiglu_fused_halves", "swiglu",
                   [](DType dt) {
                     OpGraph c;
                     ValueId gu = c.graph.input("gate_up", {7, 90}, dt);
                     c.graph.output("out", c.graph.swiglu_fused(gu));
                     c.inputs["gate_up"] = quantize(random_floats(7 * 90, 73, -4.f, 4.f), dt);
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     const auto& gu = in.at("gate_up");
                     for (int r = 0; r < 7; ++r)
                       for (int j = 0; j < 45; ++j)
                         out.push_back(ref_activation(Activation::Silu, gu[size_t(r * 90 + j)]) *
                                       gu[size_t(r * 90 + 45 + j)]);
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});

  // Row softmax over 67 columns.
  cases.push_back({"softmax", "softmax",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {5, 67}, dt);
                     c.graph.output("out", c.graph.softmax(x));
                     c.inputs["x"] = quantize(random_floats(5 * 67, 74, -5.f, 5.f), dt);
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     const auto& x = in.at("x");
                     for (int r = 0; r < 5; ++r) {
                       double m = -1e300, s = 0;
                       for (int j = 0; j < 67; ++j) m = std::max(m, double(x[size_t(r * 67 + j)]));
                       for (int j = 0; j < 67; ++j) s += std::exp(x[size_t(r * 67 + j)] - m);
                       for (int j = 0; j < 67; ++j) out.push_back(std::exp(x[size_t(r * 67 + j)] - m) / s);
                     }
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});

  // Exact GELU over an odd count.
  cases.push_back({"gelu", "unary",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {11, 13}, dt);
                     c.graph.output("out", c.graph.gelu(x));
                     c.inputs["x"] = quantize(random_floats(11 * 13, 75, -5.f, 5.f), dt);
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     for (float v : in.at("x")) out.push_back(ref_activation(Activation::Gelu, v));
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});
  return cases;
}

}  // namespace rlx::test
