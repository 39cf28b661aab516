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

  // KV-cache write: rows [2, 4, 3, 5] into a zeroed state cache [2, 9, 3, 5]
  // at positions {0, 5} read from an input (the last rows of batch 1 end at
  // the cache's end); the output is the whole cache after the write.
  cases.push_back({"kv_write", "kv_write",
                   [](DType dt) {
                     OpGraph c;
                     ValueId cache = c.graph.state("cache", {2, 9, 3, 5}, dt);
                     ValueId rows = c.graph.input("rows", {2, 4, 3, 5}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     c.graph.output("cache", c.graph.kv_write(cache, rows, pos));
                     c.inputs["rows"] = quantize(random_floats(2 * 4 * 15, 76, -3.f, 3.f), dt);
                     c.inputs["pos"] = {0.f, 5.f};
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> cache(2 * 9 * 15, 0.0);
                     const auto &rows = in.at("rows"), &pos = in.at("pos");
                     for (int b = 0; b < 2; ++b)
                       for (int i = 0; i < 4; ++i)
                         for (int e = 0; e < 15; ++e)
                           cache[size_t((b * 9 + int(pos[size_t(b)]) + i) * 15 + e)] = rows[size_t((b * 4 + i) * 15 + e)];
                     return std::map<std::string, std::vector<double>>{{"cache", cache}};
                   }});

  // Attention over a cache: 3 query rows per batch at positions pos[b]..+2
  // (pos = {1, 7}) against 10 cached keys, causal with that offset, GQA 4:2,
  // head_dim 6. Batch 0 sees only keys 0..3: the rest of its cache is noise.
  cases.push_back({"attention_cache_positions", "attention",
                   [](DType dt) {
                     OpGraph c;
                     ValueId q = c.graph.input("q", {2, 3, 24}, dt);
                     ValueId k = c.graph.input("k", {2, 10, 12}, dt);
                     ValueId v = c.graph.input("v", {2, 10, 12}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     AttentionAttrs a;
                     a.q_heads = 4;
                     a.kv_heads = 2;
                     a.head_dim = 6;
                     a.scale = 0.41f;
                     a.mask = MaskKind::Causal;
                     a.q_pos = true;
                     c.graph.output("out", c.graph.attention(q, k, v, -1, a, pos));
                     c.inputs["q"] = quantize(random_floats(2 * 3 * 24, 77, -2.f, 2.f), dt);
                     c.inputs["k"] = quantize(random_floats(2 * 10 * 12, 78, -2.f, 2.f), dt);
                     c.inputs["v"] = quantize(random_floats(2 * 10 * 12, 79, -2.f, 2.f), dt);
                     c.inputs["pos"] = {1.f, 7.f};
                     return c;
                   },
                   [](const Values& in) {
                     const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v"), &pos = in.at("pos");
                     std::vector<double> out(2 * 3 * 24, 0.0);
                     for (int b = 0; b < 2; ++b)
                       for (int i = 0; i < 3; ++i)
                         for (int h = 0; h < 4; ++h) {
                           const int kvh = h / 2, last = int(pos[size_t(b)]) + i;
                           std::vector<double> w(size_t(last + 1));
                           double mx = -1e300, sum = 0;
                           for (int j = 0; j <= last; ++j) {
                             double d = 0;
                             for (int e = 0; e < 6; ++e)
                               d += double(q[size_t((b * 3 + i) * 24 + h * 6 + e)]) * k[size_t((b * 10 + j) * 12 + kvh * 6 + e)];
                             w[size_t(j)] = d * double(0.41f);
                             mx = std::max(mx, w[size_t(j)]);
                           }
                           for (double& x : w) sum += (x = std::exp(x - mx));
                           for (int e = 0; e < 6; ++e) {
                             double o = 0;
                             for (int j = 0; j <= last; ++j) o += w[size_t(j)] / sum * v[size_t((b * 10 + j) * 12 + kvh * 6 + e)];
                             out[size_t((b * 3 + i) * 24 + h * 6 + e)] = o;
                           }
                         }
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});

  // RoPE at start positions: row s of batch b is at pos[b] + s (pos = {4, 11}),
  // 2 heads of 10 dims with 8 rotated (half-split), the last 2 copied.
  cases.push_back({"rope_start_positions", "rope",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {2, 3, 20}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     RopeAttrs a;
                     a.heads = 2;
                     a.head_dim = 10;
                     a.n_rot = 8;
                     a.theta = 500.f;
                     a.pos_is_start = true;
                     c.graph.output("out", c.graph.rope(x, pos, a));
                     c.inputs["x"] = quantize(random_floats(2 * 3 * 20, 80, -2.f, 2.f), dt);
                     c.inputs["pos"] = {4.f, 11.f};
                     return c;
                   },
                   [](const Values& in) {
                     const auto &x = in.at("x"), &pos = in.at("pos");
                     std::vector<double> out(x.begin(), x.end());
                     for (int b = 0; b < 2; ++b)
                       for (int s = 0; s < 3; ++s)
                         for (int h = 0; h < 2; ++h)
                           for (int i = 0; i < 4; ++i) {
                             const double angle = (pos[size_t(b)] + s) * std::pow(500.0, -2.0 * i / 8.0);
                             const size_t base = size_t((b * 3 + s) * 20 + h * 10);
                             const double a0 = x[base + size_t(i)], a1 = x[base + size_t(i + 4)];
                             out[base + size_t(i)] = a0 * std::cos(angle) - a1 * std::sin(angle);
                             out[base + size_t(i + 4)] = a1 * std::cos(angle) + a0 * std::sin(angle);
                           }
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});
  return cases;
}

}  // namespace rlx::test
