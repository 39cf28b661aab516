// One table of op cases for every backend (as ggml's test-backend-ops): each
// case builds a small graph at odd sizes with random inputs and computes a
// double-precision reference from those same inputs. The CPU suite checks the
// CPU backend against the reference (tests/unit/op_cases_test.cc); the GPU
// suite checks the CUDA backend against the reference and against the CPU
// backend in every execution mode (tests/gpu/op_cases_test.cc). A new kind
// means a new case here.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quant_weights.h"
#include "reference_ops.h"
#include "rlx/graph.h"
#include "rlx/session.h"
#include "test_util.h"
#include "thunks/sample_math.h"

namespace rlx::test {

using Values = std::map<std::string, std::vector<float>>;  // per input, already rounded to its dtype
using Refs = std::map<std::string, std::vector<double>>;   // per output

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
  // When > 0: every element within test::tol_for(dtype, elem_scale) of the
  // reference (atol + rtol * |ref|) instead of tol_scale's bound relative to
  // max |ref|: the bound the kernel cases moved here from the GPU harness had.
  double elem_scale = 0;
  double elem_scale_f32 = 0;  // when > 0: elem_scale for f32 results
  // A reference that needs the dtype (e.g. a sum rounded as stored); used
  // instead of `reference` when set.
  std::function<Refs(const Values&, DType)> dtype_reference;
  // GPU suite: run the executable a second time on the inputs reversed, so a
  // replayed graph must read new inputs. Only for cases whose inputs stay
  // valid reversed and that keep no state between runs.
  bool rerun_reversed = false;
};

inline Refs reference_of(const OpCase& oc, const Values& in, DType dt) {
  return oc.dtype_reference ? oc.dtype_reference(in, dt) : oc.reference(in);
}

// Checks one output of a case against its reference with the case's bound.
inline void expect_case_close(const OpCase& oc, DType dt, const std::vector<float>& got,
                              const std::vector<double>& ref, const std::string& what) {
  const double elem = dt == DType::F32 && oc.elem_scale_f32 > 0 ? oc.elem_scale_f32 : oc.elem_scale;
  if (elem > 0) expect_close(to_double(got), ref, tol_for(dt, elem), what);
  else expect_close(got, ref, tolerance(dt) * oc.tol_scale, what);
}

// The same inputs in reverse order: a second, different set from the same
// distribution, for a second run of one executable.
inline OpGraph reversed_inputs(OpGraph c) {
  for (auto& [name, v] : c.inputs) std::reverse(v.begin(), v.end());
  return c;
}

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

// ---- kernel cases moved from the GPU harness (tests/gpu/thunk_kernels_test.cc):
// the same sizes, input ranges and per-element bounds, now run on every
// backend. Matrix products, binary broadcast, activations, softmax, norms.

struct MatMulCase {
  const char* name;
  int64_t batch, m, n, k;
  bool ta, tb, bias, broadcast_a;
  Activation act;
};

inline OpCase matmul_case(const MatMulCase& mm, uint64_t seed) {
  OpCase oc;
  oc.name = mm.name;
  oc.thunk = "matmul";
  oc.build = [mm, seed](DType dt) {
    OpGraph c;
    const bool batched_a = mm.batch > 1 && !mm.broadcast_a;
    Shape as = mm.ta ? Shape{mm.k, mm.m} : Shape{mm.m, mm.k};
    Shape bs = mm.tb ? Shape{mm.n, mm.k} : Shape{mm.k, mm.n};
    if (batched_a) as.insert(as.begin(), mm.batch);
    if (mm.batch > 1) bs.insert(bs.begin(), mm.batch);
    std::vector<ValueId> in{c.graph.input("a", as, dt), c.graph.input("b", bs, dt)};
    if (mm.bias) in.push_back(c.graph.input("bias", {mm.n}, dt));
    MatMulAttrs at;
    at.trans_a = mm.ta, at.trans_b = mm.tb, at.act = mm.act;
    c.graph.output("out", c.graph.add_node(OpKind::MatMul, in, at, "mm")[0]);
    c.inputs["a"] = quantize(random_floats(size_t(numel(as)), seed), dt);
    c.inputs["b"] = quantize(random_floats(size_t(numel(bs)), seed + 1), dt);
    if (mm.bias) c.inputs["bias"] = quantize(random_floats(size_t(mm.n), seed + 2), dt);
    return c;
  };
  oc.reference = [mm](const Values& in) {
    const int64_t lda = mm.ta ? mm.m : mm.k, ldb = mm.tb ? mm.k : mm.n;
    const int64_t sa = mm.broadcast_a || mm.batch == 1 ? 0 : mm.m * mm.k, sb = mm.k * mm.n;
    const auto &a = in.at("a"), &b = in.at("b");
    std::vector<double> out;
    for (int64_t bi = 0; bi < mm.batch; ++bi)
      for (int64_t i = 0; i < mm.m; ++i)
        for (int64_t j = 0; j < mm.n; ++j) {
          double acc = mm.bias ? in.at("bias")[size_t(j)] : 0.0;
          for (int64_t q = 0; q < mm.k; ++q)
            acc += double(a[size_t(bi * sa + (mm.ta ? q * lda + i : i * lda + q))]) *
                   b[size_t(bi * sb + (mm.tb ? j * ldb + q : q * ldb + j))];
          out.push_back(ref_activation(mm.act, acc));
        }
    return Refs{{"out", out}};
  };
  // 16-bit inputs accumulate rounding over k terms; the f32 bound still
  // admits TF32 (opt-in through CompileOptions::allow_tf32).
  oc.elem_scale = 3.0;
  oc.elem_scale_f32 = 100.0;
  oc.rerun_reversed = true;
  return oc;
}

// a [3, J, K] op b, b [J, 1] (broadcast over the first and last axes) or,
// rows_of_b, [J, K] (over the first axis only, as BERT adds its position
// embeddings; with K a multiple of 8 every dtype takes the vectorized CUDA
// kernel).
inline OpCase binary_case(BinaryOp op, uint64_t seed, bool rows_of_b = false) {
  OpCase oc;
  oc.name = std::string("binary_") +
            (op == BinaryOp::Add ? "add" : op == BinaryOp::Sub ? "sub" : op == BinaryOp::Mul ? "mul" : "div") +
            (rows_of_b ? "_broadcast_rows" : "_broadcast");
  oc.thunk = "binary";
  const int J = rows_of_b ? 5 : 7, K = rows_of_b ? 40 : 33, BK = rows_of_b ? K : 1;
  oc.build = [op, seed, J, K, BK](DType dt) {
    OpGraph c;
    ValueId a = c.graph.input("a", {3, J, K}, dt), b = c.graph.input("b", {J, BK}, dt);
    ValueId y = op == BinaryOp::Add   ? c.graph.add(a, b)
                : op == BinaryOp::Sub ? c.graph.sub(a, b)
                : op == BinaryOp::Mul ? c.graph.mul(a, b)
                                      : c.graph.div(a, b);
    c.graph.output("out", y);
    c.inputs["a"] = quantize(random_floats(size_t(3 * J * K), seed), dt);
    c.inputs["b"] = quantize(random_floats(size_t(J * BK), seed + 1, 0.5f, 1.5f), dt);
    return c;
  };
  oc.reference = [op, J, K, BK](const Values& in) {
    std::vector<double> out;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < J; ++j)
        for (int k = 0; k < K; ++k) {
          double x = in.at("a")[size_t((i * J + j) * K + k)], y = in.at("b")[size_t(j * BK + (BK == 1 ? 0 : k))];
          out.push_back(op == BinaryOp::Add   ? x + y
                        : op == BinaryOp::Sub ? x - y
                        : op == BinaryOp::Mul ? x * y
                                              : x / y);
        }
    return Refs{{"out", out}};
  };
  oc.elem_scale = 1.0;
  oc.rerun_reversed = true;
  return oc;
}

inline OpCase unary_case(Activation act, const char* name, uint64_t seed) {
  OpCase oc;
  oc.name = name;
  oc.thunk = "unary";
  oc.build = [act, seed](DType dt) {
    OpGraph c;
    c.graph.output("out", c.graph.activation(c.graph.input("x", {7, 129}, dt), act));
    c.inputs["x"] = quantize(random_floats(7 * 129, seed, -4.f, 4.f), dt);
    return c;
  };
  oc.reference = [act](const Values& in) {
    std::vector<double> out;
    for (float v : in.at("x")) out.push_back(ref_activation(act, v));
    return Refs{{"out", out}};
  };
  oc.elem_scale = 1.0;
  oc.rerun_reversed = true;
  return oc;
}

inline OpCase softmax_case(int64_t cols, uint64_t seed) {
  OpCase oc;
  oc.name = "softmax_33x" + std::to_string(cols);
  oc.thunk = "softmax";
  oc.build = [cols, seed](DType dt) {
    OpGraph c;
    c.graph.output("out", c.graph.softmax(c.graph.input("x", {33, cols}, dt)));
    c.inputs["x"] = quantize(random_floats(size_t(33 * cols), seed, -6.f, 6.f), dt);
    return c;
  };
  oc.reference = [cols](const Values& in) {
    const auto& x = in.at("x");
    std::vector<double> out;
    for (int64_t r = 0; r < 33; ++r) {
      double m = -1e300, s = 0;
      for (int64_t j = 0; j < cols; ++j) m = std::max(m, double(x[size_t(r * cols + j)]));
      for (int64_t j = 0; j < cols; ++j) s += std::exp(x[size_t(r * cols + j)] - m);
      for (int64_t j = 0; j < cols; ++j) out.push_back(std::exp(x[size_t(r * cols + j)] - m) / s);
    }
    return Refs{{"out", out}};
  };
  oc.elem_scale = 1.0;
  oc.rerun_reversed = true;
  return oc;
}

// Layer or RMS norm of [rows, cols], eps 1e-5; with a residual, the fused
// add + norm with both outputs (the sum and the normed sum); with after, a
// tensor added to the normed value (NormAttrs::add_after).
inline OpCase norm_case(const char* name, NormKind kind, bool residual, int64_t rows, int64_t cols, uint64_t seed,
                        bool after = false) {
  OpCase oc;
  oc.name = name;
  oc.thunk = "norm";
  const bool layer = kind == NormKind::Layer;
  oc.build = [=](DType dt) {
    OpGraph c;
    Graph& g = c.graph;
    ValueId x = g.input("x", {rows, cols}, dt), gamma = g.input("gamma", {cols}, dt);
    ValueId beta = layer ? g.input("beta", {cols}, dt) : ValueId(-1);
    if (residual) {
      auto [sum, out] = g.add_norm(x, g.input("res", {rows, cols}, dt), gamma, beta, kind, 1e-5f);
      g.output("out", out);
      g.output("sum", sum);
    } else if (after) {
      std::vector<ValueId> in{x, gamma};
      if (layer) in.push_back(beta);
      in.push_back(g.input("after", {rows, cols}, dt));
      g.output("out", g.add_node(layer ? OpKind::LayerNorm : OpKind::RmsNorm, in, NormAttrs{kind, 1e-5f, true})[0]);
    } else {
      g.output("out", layer ? g.layer_norm(x, gamma, beta, 1e-5f) : g.rms_norm(x, gamma, 1e-5f));
    }
    c.inputs["x"] = quantize(random_floats(size_t(rows * cols), seed, -2.f, 3.f), dt);
    if (residual) c.inputs["res"] = quantize(random_floats(size_t(rows * cols), seed + 1), dt);
    if (after) c.inputs["after"] = quantize(random_floats(size_t(rows * cols), seed + 4, -4.f, 4.f), dt);
    c.inputs["gamma"] = quantize(random_floats(size_t(cols), seed + 2, 0.5f, 1.5f), dt);
    if (layer) c.inputs["beta"] = quantize(random_floats(size_t(cols), seed + 3), dt);
    return c;
  };
  oc.dtype_reference = [=](const Values& in, DType dt) {
    std::vector<double> out, sum;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> v(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) {
        double s = in.at("x")[size_t(r * cols + j)];
        // The kernel normalizes the sum as stored in dt.
        if (residual) s = quantize({float(s + in.at("res")[size_t(r * cols + j)])}, dt)[0];
        v[size_t(j)] = s;
        sum.push_back(s);
      }
      double mean = 0, var = 0;
      if (layer) {
        for (double x : v) mean += x;
        mean /= double(cols);
      }
      for (double x : v) var += (x - mean) * (x - mean);
      var /= double(cols);
      for (int64_t j = 0; j < cols; ++j) {
        double y = (v[size_t(j)] - mean) / std::sqrt(var + 1e-5) * in.at("gamma")[size_t(j)];
        if (layer) y += in.at("beta")[size_t(j)];
        // The normed value is rounded to dt, as stored, before the add.
        if (after) y = double(quantize({float(y)}, dt)[0]) + in.at("after")[size_t(r * cols + j)];
        out.push_back(y);
      }
    }
    Refs m{{"out", out}};
    if (residual) m["sum"] = sum;
    return m;
  };
  oc.elem_scale = 2.0;
  oc.rerun_reversed = true;
  return oc;
}

// Sum, mean or max over the middle axis of [5, 129, inner].
inline OpCase reduce_case(ReduceKind kind, int64_t inner, uint64_t seed) {
  OpCase oc;
  oc.name = std::string("reduce_") + (kind == ReduceKind::Sum ? "sum" : kind == ReduceKind::Mean ? "mean" : "max") +
            "_inner" + std::to_string(inner);
  oc.thunk = "reduce";
  oc.build = [=](DType dt) {
    OpGraph c;
    c.graph.output("out", c.graph.reduce(c.graph.input("x", {5, 129, inner}, dt), 1, kind));
    c.inputs["x"] = quantize(random_floats(size_t(5 * 129 * inner), seed), dt);
    return c;
  };
  oc.reference = [=](const Values& in) {
    std::vector<double> out;
    for (int64_t o = 0; o < 5; ++o)
      for (int64_t k = 0; k < inner; ++k) {
        double acc = kind == ReduceKind::Max ? -INFINITY : 0;
        for (int64_t l = 0; l < 129; ++l) {
          double v = in.at("x")[size_t((o * 129 + l) * inner + k)];
          acc = kind == ReduceKind::Max ? std::max(acc, v) : acc + v;
        }
        out.push_back(kind == ReduceKind::Mean ? acc / 129.0 : acc);
      }
    return Refs{{"out", out}};
  };
  oc.elem_scale = kind == ReduceKind::Max ? 1.0 : 4.0;
  oc.rerun_reversed = true;
  return oc;
}

// matmul_q over a constant Q8_0/Q4_0/FP8 weight [n, k]: up to 8 rows the
// matrix-vector path, more (17) the dequantize-then-product path.
inline OpCase matmul_q_case(const char* name, QuantType t, int64_t m, int64_t n, int64_t k, bool bias, uint64_t seed) {
  OpCase oc;
  oc.name = name;
  oc.thunk = "matmul_q";
  const QuantWeight w = random_quant_weight(t, n, k, seed);
  oc.build = [=](DType dt) {
    OpGraph c;
    const auto [quants, scales] = quant_constants(c.graph, w);
    ValueId x = c.graph.input("x", {m, k}, dt);
    ValueId b = bias ? c.graph.input("bias", {n}, dt) : -1;
    c.graph.output("out", c.graph.matmul_q(x, quants, scales, t, b));
    c.inputs["x"] = quantize(random_floats(size_t(m * k), seed + 1), dt);
    if (bias) c.inputs["bias"] = quantize(random_floats(size_t(n), seed + 2), dt);
    return c;
  };
  oc.reference = [=](const Values& in) {
    return Refs{{"out", quant_product_reference(in.at("x"), w, m, bias ? &in.at("bias") : nullptr)}};
  };
  oc.elem_scale = 4;  // sums of k products
  return oc;
}

// gather_q: rows of a constant Q8_0/Q4_0/Q4_1 table [vocab, dim] (a tied
// embedding kept quantized), dequantized into the case's dtype; the
// reference is the table's dequantized values, exact in f32.
inline OpCase gather_q_case(const char* name, QuantType t, int64_t vocab, int64_t dim, uint64_t seed) {
  OpCase oc;
  oc.name = name;
  oc.thunk = "gather_q";
  const QuantWeight w = random_quant_weight(t, vocab, dim, seed);
  const std::vector<float> ids{3, 0, float(vocab - 1), 7, 3, float(vocab / 2), 11};  // [7]: repeats, both ends
  oc.build = [=](DType dt) {
    OpGraph c;
    const auto [quants, scales] = quant_constants(c.graph, w);
    ValueId id = c.graph.input("ids", {int64_t(ids.size())}, DType::I32);
    c.graph.output("out", c.graph.gather_q(quants, scales, id, t, dt));
    c.inputs["ids"] = ids;
    return c;
  };
  oc.reference = [=](const Values& in) {
    std::vector<double> out;
    for (float v : in.at("ids"))
      for (int64_t j = 0; j < dim; ++j) out.push_back(w.values[size_t(int64_t(v) * dim + j)]);
    return Refs{{"out", out}};
  };
  oc.elem_scale = 1;  // one rounding to the dtype
  return oc;
}

// A product of few rows with its MatVecFusion (fuse_matvec): x RMS-normalized
// first (norm), a residual added last, over a float weight input [n, k] or
// (quant set) a constant Q8_0/Q4_0 weight. The reference normalizes in double.
// glu: the n weight rows are [gate; up] and out = glu(gate) * up, n / 2 wide.
struct MatVecFusionCase {
  const char* name;
  std::optional<QuantType> quant;
  int64_t m, n, k;
  bool bias, norm, residual;
  Activation act;  // float weights only (matmul_q has no activation)
  Activation glu = Activation::None;
};

inline OpCase matvec_fusion_case(const MatVecFusionCase& f, uint64_t seed) {
  OpCase oc;
  oc.name = f.name;
  oc.thunk = f.quant ? "matmul_q" : "matmul";
  const std::optional<QuantWeight> qw =
      f.quant ? std::optional<QuantWeight>(random_quant_weight(*f.quant, f.n, f.k, seed)) : std::nullopt;
  constexpr float kEps = 1e-5f;
  oc.build = [=](DType dt) {
    OpGraph c;
    Graph& g = c.graph;
    std::vector<ValueId> in{g.input("x", {f.m, f.k}, dt)};
    if (qw) {
      const auto [quants, scales] = quant_constants(g, *qw);
      in.push_back(quants);
      in.push_back(scales);
    } else {
      in.push_back(g.input("w", {f.n, f.k}, dt));
      c.inputs["w"] = quantize(random_floats(size_t(f.n * f.k), seed + 1), dt);
    }
    MatVecFusion fused;
    fused.rms_norm = f.norm;
    fused.eps = kEps;
    fused.residual = f.residual;
    fused.glu = f.glu;
    if (f.bias) in.push_back(g.input("bias", {f.n}, dt));
    if (f.norm) in.push_back(g.input("gamma", {f.k}, dt));
    if (f.residual) in.push_back(g.input("residual", {f.m, f.n}, dt));
    if (qw) {
      MatMulQAttrs at;
      at.type = *f.quant;
      at.fused = fused;
      g.output("out", g.add_node(OpKind::MatMulQ, in, at, "mmq")[0]);
    } else {
      MatMulAttrs at;
      at.trans_b = true;
      at.act = f.act;
      at.fused = fused;
      g.output("out", g.add_node(OpKind::MatMul, in, at, "mm")[0]);
    }
    // x away from zero mean-square, so the norm's scale is well conditioned.
    std::vector<float> x = random_floats(size_t(f.m * f.k), seed + 2);
    for (float& v : x) v = v * 2.f + (v < 0 ? -0.25f : 0.25f);
    c.inputs["x"] = quantize(x, dt);
    if (f.bias) c.inputs["bias"] = quantize(random_floats(size_t(f.n), seed + 3), dt);
    if (f.norm) c.inputs["gamma"] = quantize(random_floats(size_t(f.k), seed + 4), dt);
    if (f.residual) c.inputs["residual"] = quantize(random_floats(size_t(f.m * f.n), seed + 5), dt);
    return c;
  };
  oc.reference = [=](const Values& in) {
    const std::vector<float>& w = qw ? qw->values : in.at("w");
    const std::vector<float>& x = in.at("x");
    std::vector<double> out;
    const int64_t h = f.n / 2;
    for (int64_t i = 0; i < f.m; ++i) {
      std::vector<double> xi(size_t(f.k)), row;
      double ss = 0;
      for (int64_t q = 0; q < f.k; ++q) ss += double(x[size_t(i * f.k + q)]) * x[size_t(i * f.k + q)];
      const double s = f.norm ? 1.0 / std::sqrt(ss / double(f.k) + kEps) : 1.0;
      for (int64_t q = 0; q < f.k; ++q)
        xi[size_t(q)] = double(x[size_t(i * f.k + q)]) * s * (f.norm ? double(in.at("gamma")[size_t(q)]) : 1.0);
      for (int64_t j = 0; j < f.n; ++j) {
        double acc = f.bias ? in.at("bias")[size_t(j)] : 0.0;
        for (int64_t q = 0; q < f.k; ++q) acc += xi[size_t(q)] * w[size_t(j * f.k + q)];
        acc = ref_activation(f.act, acc);
        if (f.residual) acc += in.at("residual")[size_t(i * f.n + j)];
        row.push_back(acc);
      }
      if (f.glu == Activation::None) out.insert(out.end(), row.begin(), row.end());
      else
        for (int64_t j = 0; j < h; ++j) out.push_back(ref_activation(f.glu, row[size_t(j)]) * row[size_t(h + j)]);
    }
    return Refs{{"out", out}};
  };
  oc.elem_scale = 4;  // sums of k products, a normalized x
  oc.rerun_reversed = true;
  return oc;
}

inline void add_kernel_cases(std::vector<OpCase>& cases) {
  const MatMulCase mms[] = {
      {"matmul_bias_gelu_tanh", 1, 7, 33, 129, false, false, true, false, Activation::GeluTanh},
      {"matmul_batched_trans_b_gelu", 3, 33, 8, 17, false, true, false, false, Activation::Gelu},
      {"matmul_broadcast_trans_a_relu", 2, 16, 24, 40, true, false, true, true, Activation::Relu},
      {"matmul_bias_gelu_tail", 1, 9, 129, 33, false, true, true, false, Activation::Gelu},
      {"matmul_odd_silu", 1, 1, 7, 33, false, false, false, false, Activation::Silu},
      // Few rows against a [n, k] weight: the shapes of decoding, which the
      // CUDA backend may give to its matrix-vector kernel.
      {"matmul_gemv_one_row_bias_gelu", 1, 1, 77, 264, false, true, true, false, Activation::Gelu},
      {"matmul_gemv_3_rows_silu", 1, 3, 129, 40, false, true, false, false, Activation::Silu},
      {"matmul_gemv_8_rows_batched", 2, 8, 33, 1032, false, true, false, false, Activation::None},
      // Many rows against a [n, k] weight with n and k whole 16-byte chunks:
      // the shapes the CUDA backend may give to its CUTLASS GEMM on Hopper.
      // Partial tiles in m, n and k (tiles are 128 x 128 or 256, k 64).
      {"matmul_cutlass_bias_gelu", 1, 200, 264, 136, false, true, true, false, Activation::Gelu},
      {"matmul_cutlass_bias_gelu_130_rows", 1, 130, 72, 200, false, true, true, false, Activation::Gelu},
      {"matmul_cutlass_gelu_no_bias", 1, 136, 40, 64, false, true, false, false, Activation::Gelu},
      {"matmul_cutlass_bias_only", 1, 64, 520, 32, false, true, true, false, Activation::None},
  };
  uint64_t seed = 200;
  for (const MatMulCase& mm : mms) cases.push_back(matmul_case(mm, seed += 10));
  // Rows longer than one round of the CUDA matrix-vector kernel's loads
  // (2048 elements of f16, 1024 of f32): four warps share each row. (Its
  // own seed: the cases after keep theirs.)
  cases.push_back(matmul_case({"matmul_gemv_long_rows_bias", 1, 2, 37, 5640, false, true, true, false,
                               Activation::None}, 7000));
  // The CUDA backend's few-row GEMM (64 x 64 tiles, k in steps of 64, split
  // across blocks): partial row and column tiles, a single step, long k.
  // (Their own seeds.)
  const MatMulCase few_rows[] = {
      {"matmul_fewrows_bias_gelu_split", 1, 77, 136, 768, false, true, true, false, Activation::Gelu},
      {"matmul_fewrows_one_step", 1, 130, 64, 64, false, true, false, false, Activation::None},
      {"matmul_fewrows_bias_silu_long_k", 1, 33, 72, 1536, false, true, true, false, Activation::Silu},
      {"matmul_fewrows_300_rows_bias", 1, 300, 200, 320, false, true, true, false, Activation::None},
  };
  uint64_t few_rows_seed = 7100;
  for (const MatMulCase& mm : few_rows) cases.push_back(matmul_case(mm, few_rows_seed += 10));
  cases.push_back(matmul_q_case("matmul_q_q8_0_1x37x96_bias", QuantType::Q8_0, 1, 37, 96, true, seed += 10));
  cases.push_back(matmul_q_case("matmul_q_q4_0_3x37x160", QuantType::Q4_0, 3, 37, 160, false, seed += 10));
  cases.push_back(matmul_q_case("matmul_q_q4_0_8x19x64_bias", QuantType::Q4_0, 8, 19, 64, true, seed += 10));
  cases.push_back(matmul_q_case("matmul_q_q8_0_17x37x96_bias", QuantType::Q8_0, 17, 37, 96, true, seed += 10));
  cases.push_back(gather_q_case("gather_q_q8_0_41x96", QuantType::Q8_0, 41, 96, 7301));
  cases.push_back(gather_q_case("gather_q_q4_0_19x160", QuantType::Q4_0, 19, 160, 7311));
  cases.push_back(gather_q_case("gather_q_q4_1_23x64", QuantType::Q4_1, 23, 64, 7321));
  // FP8 (e4m3) weights: one and three rows (the matrix-vector path), 17
  // (the dequantized one), odd n; the gather. Their own seeds.
  cases.push_back(matmul_q_case("matmul_q_fp8_1x37x96_bias", QuantType::FP8, 1, 37, 96, true, 7401));
  cases.push_back(matmul_q_case("matmul_q_fp8_3x41x160", QuantType::FP8, 3, 41, 160, false, 7411));
  cases.push_back(matmul_q_case("matmul_q_fp8_17x37x96_bias", QuantType::FP8, 17, 37, 96, true, 7421));
  cases.push_back(gather_q_case("gather_q_fp8_41x96", QuantType::FP8, 41, 96, 7431));
  const MatVecFusionCase fusions[] = {
      {"matvec_norm_residual_1x77x264_bias", std::nullopt, 1, 77, 264, true, true, true, Activation::None},
      {"matvec_norm_3x129x40_silu", std::nullopt, 3, 129, 40, false, true, false, Activation::Silu},
      {"matvec_residual_8x33x1032", std::nullopt, 8, 33, 1032, false, false, true, Activation::None},
      {"matvec_norm_residual_1x19x5640", std::nullopt, 1, 19, 5640, false, true, true, Activation::None},
      {"matvec_q4_0_norm_residual_2x37x160", QuantType::Q4_0, 2, 37, 160, false, true, true, Activation::None},
      {"matvec_q8_0_norm_1x19x96_bias", QuantType::Q8_0, 1, 19, 96, true, true, false, Activation::None},
      {"matvec_q8_0_norm_8x21x1024", QuantType::Q8_0, 8, 21, 1024, false, true, false, Activation::None},
      {"matvec_fp8_norm_residual_2x37x160_bias", QuantType::FP8, 2, 37, 160, true, true, true, Activation::None},
      {"matvec_fp8_norm_8x21x1024", QuantType::FP8, 8, 21, 1024, false, true, false, Activation::None},
      {"matvec_fp8_residual_5x19x8224", QuantType::FP8, 5, 19, 8224, false, false, true, Activation::None},
  };
  uint64_t fusion_seed = 5000;  // apart, so the seeds of the cases after keep their values
  for (const MatVecFusionCase& f : fusions) cases.push_back(matvec_fusion_case(f, fusion_seed += 10));
  // The gate/up product with the SwiGLU/GeGLU after it (fuse_matvec_glu):
  // output columns that leave a block's last gate warps idle, one round of
  // loads and rows of several (the split kernel), quantized rows in tiles.
  const MatVecFusionCase glus[] = {
      {"matvec_glu_silu_norm_1x74x264_bias", std::nullopt, 1, 74, 264, true, true, false, Activation::None,
       Activation::Silu},
      {"matvec_glu_gelu_tanh_3x66x40", std::nullopt, 3, 66, 40, false, false, false, Activation::None,
       Activation::GeluTanh},
      {"matvec_glu_silu_norm_2x38x5640_bias", std::nullopt, 2, 38, 5640, true, true, false, Activation::None,
       Activation::Silu},
      {"matvec_glu_q4_0_silu_norm_2x74x160", QuantType::Q4_0, 2, 74, 160, false, true, false, Activation::None,
       Activation::Silu},
      {"matvec_glu_q8_0_gelu_tanh_1x38x96_bias", QuantType::Q8_0, 1, 38, 96, true, false, false, Activation::None,
       Activation::GeluTanh},
      {"matvec_glu_q8_0_silu_norm_5x42x1024", QuantType::Q8_0, 5, 42, 1024, false, true, false, Activation::None,
       Activation::Silu},
      {"matvec_glu_fp8_gelu_tanh_1x38x96_bias", QuantType::FP8, 1, 38, 96, true, false, false, Activation::None,
       Activation::GeluTanh},
      {"matvec_glu_fp8_silu_norm_7x42x1024", QuantType::FP8, 7, 42, 1024, false, true, false, Activation::None,
       Activation::Silu},
  };
  uint64_t glu_seed = 9000;
  for (const MatVecFusionCase& f : glus) cases.push_back(matvec_fusion_case(f, glu_seed += 10));
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div})
    cases.push_back(binary_case(op, seed += 10));
  uint64_t rows_seed = 6000;  // apart, so the seeds of the cases after keep their values
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div})
    cases.push_back(binary_case(op, rows_seed += 10, true));
  cases.push_back(unary_case(Activation::Gelu, "unary_gelu", seed += 10));
  cases.push_back(unary_case(Activation::GeluTanh, "unary_gelu_tanh", seed += 10));
  cases.push_back(unary_case(Activation::Silu, "unary_silu", seed += 10));
  cases.push_back(unary_case(Activation::Relu, "unary_relu", seed += 10));
  cases.push_back(unary_case(Activation::Tanh, "unary_tanh", seed += 10));
  for (int64_t cols : {1, 7, 129, 1000}) cases.push_back(softmax_case(cols, seed += 10));
  // Rows of whole 16-byte chunks take a vectorized CUDA kernel: up to 128
  // chunks a warp per row (1-4 chunks a lane; 1030 rows: four rows a block,
  // the last block part empty), longer rows a block per row (1, 2 and 4
  // chunks a thread); other rows the general one.
  cases.push_back(norm_case("layer_norm_residual_7x769", NormKind::Layer, true, 7, 769, seed += 10));
  cases.push_back(norm_case("layer_norm_33x33", NormKind::Layer, false, 33, 33, seed += 10));
  cases.push_back(norm_case("rms_norm_residual_1x129", NormKind::Rms, true, 1, 129, seed += 10));
  cases.push_back(norm_case("layer_norm_residual_5x768", NormKind::Layer, true, 5, 768, seed += 10));
  cases.push_back(norm_case("rms_norm_3x4096", NormKind::Rms, false, 3, 4096, seed += 10));
  cases.push_back(norm_case("layer_norm_residual_2x8192", NormKind::Layer, true, 2, 8192, seed += 10));
  cases.push_back(norm_case("layer_norm_residual_3x2051", NormKind::Layer, true, 3, 2051, seed += 10));
  cases.push_back(norm_case("rms_norm_2x1100", NormKind::Rms, false, 2, 1100, seed += 10));
  cases.push_back(norm_case("rms_norm_9x1000", NormKind::Rms, false, 9, 1000, seed += 10));
  cases.push_back(norm_case("layer_norm_residual_1030x384", NormKind::Layer, true, 1030, 384, seed += 10));
  // add_after (Gemma's sandwich norms): a decode row of 2304 (a block), 5 rows
  // of 384 (a warp each), 3 rows of 129 (the general kernel).
  cases.push_back(norm_case("rms_norm_after_1x2304", NormKind::Rms, false, 1, 2304, seed += 10, true));
  cases.push_back(norm_case("rms_norm_after_5x384", NormKind::Rms, false, 5, 384, seed += 10, true));
  cases.push_back(norm_case("layer_norm_after_3x129", NormKind::Layer, false, 3, 129, seed += 10, true));
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max})
    for (int64_t inner : {1, 7}) cases.push_back(reduce_case(kind, inner, seed += 10));
}

// Reference of one query head q[6] (scaled by `scale`) attending keys
// 0..last of kv head kvh of batch b in K and V [2, 10, 12] (2 kv heads of 6):
// the two cache-attention cases share it.
inline void ref_cache_head(const double* q, const std::vector<float>& k, const std::vector<float>& v, int b,
                           int kvh, int last, double scale, double* out) {
  std::vector<double> w(size_t(last + 1));
  double mx = -1e300, sum = 0;
  for (int j = 0; j <= last; ++j) {
    double d = 0;
    for (int e = 0; e < 6; ++e) d += q[e] * k[size_t((b * 10 + j) * 12 + kvh * 6 + e)];
    w[size_t(j)] = d * scale;
    mx = std::max(mx, w[size_t(j)]);
  }
  for (double& x : w) sum += (x = std::exp(x - mx));
  for (int e = 0; e < 6; ++e) {
    double o = 0;
    for (int j = 0; j <= last; ++j) o += w[size_t(j)] / sum * v[size_t((b * 10 + j) * 12 + kvh * 6 + e)];
    out[e] = o;
  }
}

// Causal attention over batch 2 with a sliding window (a query at position
// p sees keys in (p - window, p]), scores soft-capped (cap * tanh(s / cap))
// where cap > 0: sq query rows at positions pos[b].. against skv keys (a KV
// cache), or without pos the last sq positions of skv. With ring, the cache
// is a ring (AttentionAttrs::ring: the key at position j in row j mod skv),
// the window's keys wrapping past its end; rows outside the window hold
// other positions' keys (random), which no output may read.
inline OpCase windowed_attention_case(const std::string& name, int64_t sq, int64_t skv, int qh, int kvh, int hd,
                                      int window, float cap, std::vector<float> pos, uint64_t seed, float scale,
                                      bool ring) {
  auto build = [=](DType dt) {
    OpGraph c;
    ValueId q = c.graph.input("q", {2, sq, int64_t(qh) * hd}, dt);
    ValueId k = c.graph.input("k", {2, skv, int64_t(kvh) * hd}, dt);
    ValueId v = c.graph.input("v", {2, skv, int64_t(kvh) * hd}, dt);
    AttentionAttrs a;
    a.q_heads = qh;
    a.kv_heads = kvh;
    a.head_dim = hd;
    a.scale = scale;
    a.mask = MaskKind::Causal;
    a.window = window;
    a.softcap = cap;
    a.q_pos = !pos.empty();
    a.ring = ring;
    ValueId p = a.q_pos ? c.graph.input("pos", {2}, DType::I32) : -1;
    c.graph.output("out", c.graph.attention(q, k, v, -1, a, p));
    c.inputs["q"] = quantize(random_floats(size_t(2 * sq * qh * hd), seed, -3.f, 3.f), dt);
    c.inputs["k"] = quantize(random_floats(size_t(2 * skv * kvh * hd), seed + 1, -3.f, 3.f), dt);
    c.inputs["v"] = quantize(random_floats(size_t(2 * skv * kvh * hd), seed + 2, -2.f, 2.f), dt);
    if (a.q_pos) c.inputs["pos"] = pos;
    return c;
  };
  auto reference = [=](const Values& in) {
    const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v");
    std::vector<double> out(size_t(2 * sq * qh * hd), 0.0);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < sq; ++i)
        for (int h = 0; h < qh; ++h) {
          const int64_t at = pos.empty() ? skv - sq + i : int64_t(in.at("pos")[size_t(b)]) + i;
          const int64_t first = std::max<int64_t>(0, at - window + 1), g = h / (qh / kvh);
          auto row = [&](int64_t j) { return (b * skv + (ring ? j % skv : j)) * kvh + g; };
          std::vector<double> w;
          double mx = -1e300, sum = 0;
          for (int64_t j = first; j <= at; ++j) {
            double d = 0;
            for (int e = 0; e < hd; ++e) d += double(q[size_t(((b * sq + i) * qh + h) * hd + e)]) * k[size_t(row(j) * hd + e)];
            w.push_back(cap > 0 ? cap * std::tanh(d * double(scale) / cap) : d * double(scale));
            mx = std::max(mx, w.back());
          }
          for (double& x : w) sum += (x = std::exp(x - mx));
          for (int e = 0; e < hd; ++e) {
            double o = 0;
            for (int64_t j = first; j <= at; ++j) o += w[size_t(j - first)] / sum * v[size_t(row(j) * hd + e)];
            out[size_t(((b * sq + i) * qh + h) * hd + e)] = o;
          }
        }
    return std::map<std::string, std::vector<double>>{{"out", out}};
  };
  return {name, "attention", build, reference};
}

// The sizes pick the kernel: prefill rows without pos (short path), rows at
// positions (general), one row (decode; head_dim 16 with 16-byte rows: a key
// per lane, split over a cluster from 256 keys).
inline OpCase window_softcap_case(const std::string& name, int64_t sq, int64_t skv, int qh, int kvh, int hd,
                                  int window, float cap, std::vector<float> pos, uint64_t seed) {
  return windowed_attention_case(name, sq, skv, qh, kvh, hd, window, cap, std::move(pos), seed, 0.43f, false);
}

// A ring cache of `rows` rows, no soft cap; sizes pick the kernel as above.
inline OpCase ring_window_case(const std::string& name, int64_t sq, int64_t rows, int qh, int kvh, int hd, int window,
                               std::vector<float> pos, uint64_t seed) {
  return windowed_attention_case(name, sq, rows, qh, kvh, hd, window, 0.f, std::move(pos), seed, 0.37f, true);
}

// Attention without a causal mask over batch 2 with a two-sided sliding
// window (query i sees keys |i - j| < window: ModernBERT's local layers),
// sequences longer than the window; with padding, batch 1 keeps its first
// `kept` keys, so its last padded rows see no key at all and give zeros.
// head_dim up to 128 takes the CUDA short path, above it the general kernel;
// two rows take the CPU's few-row path.
inline OpCase two_sided_window_case(const std::string& name, int64_t seq, int qh, int kvh, int hd, int window,
                                    bool padding, int64_t kept, uint64_t seed) {
  const float scale = 0.37f;
  auto build = [=](DType dt) {
    OpGraph c;
    ValueId q = c.graph.input("q", {2, seq, int64_t(qh) * hd}, dt);
    ValueId k = c.graph.input("k", {2, seq, int64_t(kvh) * hd}, dt);
    ValueId v = c.graph.input("v", {2, seq, int64_t(kvh) * hd}, dt);
    ValueId m = padding ? c.graph.input("mask", {2, seq}, DType::I32) : ValueId(-1);
    AttentionAttrs a;
    a.q_heads = qh;
    a.kv_heads = kvh;
    a.head_dim = hd;
    a.scale = scale;
    a.mask = padding ? MaskKind::Padding : MaskKind::None;
    a.window = window;
    c.graph.output("out", c.graph.attention(q, k, v, m, a));
    c.inputs["q"] = quantize(random_floats(size_t(2 * seq * qh * hd), seed, -3.f, 3.f), dt);
    c.inputs["k"] = quantize(random_floats(size_t(2 * seq * kvh * hd), seed + 1, -3.f, 3.f), dt);
    c.inputs["v"] = quantize(random_floats(size_t(2 * seq * kvh * hd), seed + 2, -2.f, 2.f), dt);
    if (padding) {
      std::vector<float> mask(size_t(2 * seq), 1.f);
      for (int64_t j = kept; j < seq; ++j) mask[size_t(seq + j)] = 0.f;
      c.inputs["mask"] = mask;
    }
    return c;
  };
  auto reference = [=](const Values& in) {
    const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v");
    auto keep = [&](int64_t b, int64_t j) { return !padding || in.at("mask")[size_t(b * seq + j)] != 0.f; };
    std::vector<double> out(size_t(2 * seq * qh * hd), 0.0);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < seq; ++i)
        for (int h = 0; h < qh; ++h) {
          const int64_t g = h / (qh / kvh);
          std::vector<int64_t> keys;
          for (int64_t j = std::max<int64_t>(0, i - window + 1); j < std::min<int64_t>(seq, i + window); ++j)
            if (keep(b, j)) keys.push_back(j);
          if (keys.empty()) continue;  // a padded row whose window holds no kept key
          std::vector<double> w;
          double mx = -1e300, sum = 0;
          for (int64_t j : keys) {
            double d = 0;
            for (int e = 0; e < hd; ++e)
              d += double(q[size_t(((b * seq + i) * qh + h) * hd + e)]) * k[size_t(((b * seq + j) * kvh + g) * hd + e)];
            w.push_back(d * double(scale));
            mx = std::max(mx, w.back());
          }
          for (double& x : w) sum += (x = std::exp(x - mx));
          for (int e = 0; e < hd; ++e) {
            double o = 0;
            for (size_t n = 0; n < keys.size(); ++n)
              o += w[n] / sum * v[size_t(((b * seq + keys[n]) * kvh + g) * hd + e)];
            out[size_t(((b * seq + i) * qh + h) * hd + e)] = o;
          }
        }
    return std::map<std::string, std::vector<double>>{{"out", out}};
  };
  return {name, "attention", build, reference};
}

// The mixture-of-experts cases (moe_op_cases.h, included at the end).
inline void add_moe_cases(std::vector<OpCase>& cases);
// YaRN / LongRoPE's attention factor on every rotating path (op_cases_rope_scaling.h).
inline void add_rope_scaling_cases(std::vector<OpCase>& cases);

inline std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  add_kernel_cases(cases);
  add_moe_cases(cases);

  cases.push_back(window_softcap_case("attention_window_softcap_prefill", 13, 13, 4, 2, 6, 4, 0.7f, {}, 91));
  cases.push_back(window_softcap_case("attention_window_softcap_cache", 3, 10, 4, 2, 6, 3, 1.1f, {1.f, 7.f}, 94));
  cases.push_back(window_softcap_case("attention_window_softcap_decode", 1, 10, 4, 2, 6, 4, 0.9f, {3.f, 8.f}, 97));
  cases.push_back(
      window_softcap_case("attention_window_softcap_decode_long", 1, 300, 2, 1, 16, 40, 1.3f, {150.f, 299.f}, 100));
  // Gemma 2's decode: head_dim 256 (two lanes a key row in f16/bf16), a
  // window inside a cache split over a cluster.
  cases.push_back(
      window_softcap_case("attention_window_softcap_decode_hd256", 1, 600, 4, 2, 256, 300, 1.7f, {430.f, 599.f}, 101));
  // Ring caches: a decode row in place (f32) and on the rows kernel, prefill
  // rows on the general kernel, a long window split over a cluster, head_dim
  // 256; in each, batch 0's window wraps past the ring's end.
  cases.push_back(ring_window_case("attention_ring_decode", 1, 45, 4, 2, 16, 9, {50.f, 20.f}, 131));
  cases.push_back(ring_window_case("attention_ring_prefill", 5, 43, 4, 2, 24, 6, {40.f, 3.f}, 134));
  cases.push_back(ring_window_case("attention_ring_decode_split", 1, 300, 2, 1, 16, 200, {650.f, 250.f}, 137));
  cases.push_back(ring_window_case("attention_ring_decode_hd256", 1, 300, 4, 2, 256, 120, {700.f, 130.f}, 140));
  cases.push_back(two_sided_window_case("attention_two_sided_window_padding", 19, 3, 3, 16, 4, true, 12, 103));
  cases.push_back(two_sided_window_case("attention_two_sided_window_gqa", 23, 4, 2, 8, 5, false, 23, 106));
  cases.push_back(two_sided_window_case("attention_two_sided_window_general", 21, 2, 1, 136, 3, true, 17, 109));
  // Two rows, each seeing only itself: the CPU's few-row path.
  cases.push_back(two_sided_window_case("attention_two_sided_window_two_rows", 2, 2, 2, 8, 1, true, 2, 112));

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

  // GeGLU: the tanh GELU on the gate (Gemma's FFN), rows 4x3, 29 columns.
  cases.push_back({"geglu", "swiglu",
                   [](DType dt) {
                     OpGraph c;
                     ValueId gate = c.graph.input("gate", {4, 3, 29}, dt);
                     ValueId up = c.graph.input("up", {4, 3, 29}, dt);
                     c.graph.output("out", c.graph.swiglu(gate, up, Activation::GeluTanh));
                     c.inputs["gate"] = quantize(random_floats(4 * 3 * 29, 74, -4.f, 4.f), dt);
                     c.inputs["up"] = quantize(random_floats(4 * 3 * 29, 75, -2.f, 2.f), dt);
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     const auto &g = in.at("gate"), &u = in.at("up");
                     for (size_t i = 0; i < g.size(); ++i) {
                       const double x = g[i];
                       out.push_back(0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * u[i]);
                     }
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});

  // GeGLU with the erf GELU (ModernBERT's FFN), both halves of one row
  // [3, 5, 2*31] as the model narrows them.
  cases.push_back({"geglu_erf_halves", "swiglu",
                   [](DType dt) {
                     OpGraph c;
                     ValueId gu = c.graph.input("gu", {3, 5, 62}, dt);
                     c.graph.output("out", c.graph.swiglu(c.graph.narrow(gu, 2, 0, 31), c.graph.narrow(gu, 2, 31, 31),
                                                          Activation::Gelu));
                     c.inputs["gu"] = quantize(random_floats(3 * 5 * 62, 76, -4.f, 4.f), dt);
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     const auto& gu = in.at("gu");
                     for (size_t r = 0; r < 15; ++r)
                       for (size_t i = 0; i < 31; ++i) {
                         const double x = gu[r * 62 + i];
                         out.push_back(0.5 * x * (1 + std::erf(x / std::sqrt(2.0))) * gu[r * 62 + 31 + i]);
                       }
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

  // A ring cache's write: rows [2, 4, 6] into a zeroed cache [2, 7, 6] at
  // positions {5, 9}, row t mod 7 (batch 0 wraps to rows 5, 6, 0, 1).
  cases.push_back({"kv_write_ring", "kv_write",
                   [](DType dt) {
                     OpGraph c;
                     ValueId cache = c.graph.state("cache", {2, 7, 6}, dt);
                     ValueId rows = c.graph.input("rows", {2, 4, 6}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     c.graph.output("cache", c.graph.kv_write(cache, rows, pos, -1, true));
                     c.inputs["rows"] = quantize(random_floats(2 * 4 * 6, 143, -3.f, 3.f), dt);
                     c.inputs["pos"] = {5.f, 9.f};
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> cache(2 * 7 * 6, 0.0);
                     const auto &rows = in.at("rows"), &pos = in.at("pos");
                     for (int b = 0; b < 2; ++b)
                       for (int i = 0; i < 4; ++i)
                         for (int e = 0; e < 6; ++e)
                           cache[size_t((b * 7 + (int(pos[size_t(b)]) + i) % 7) * 6 + e)] = rows[size_t((b * 4 + i) * 6 + e)];
                     return std::map<std::string, std::vector<double>>{{"cache", cache}};
                   }});

  // The fused K/V write of a decoder layer: kv_write(cache, concat(rope(K
  // slice), V slice)) of one QKV row [2, 3, 37] (8 q columns, K = 2 heads of
  // 6 at 8 with 4 rotated, interleaved pairs, V 12 columns at 20, 5 unused)
  // lowers to one kv_write reading the row in place and rotating K at
  // positions {0, 6}; the output is the cache [2, 9, 24] after the write.
  cases.push_back({"kv_write_rope_slices", "kv_write",
                   [](DType dt) {
                     OpGraph c;
                     ValueId cache = c.graph.state("cache", {2, 9, 24}, dt);
                     ValueId qkv = c.graph.input("qkv", {2, 3, 37}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     RopeAttrs a;
                     a.heads = 2;
                     a.head_dim = 6;
                     a.n_rot = 4;
                     a.theta = 300.f;
                     a.interleaved = true;
                     a.pos_is_start = true;
                     ValueId k = c.graph.rope(c.graph.narrow(qkv, 2, 8, 12), pos, a);
                     ValueId rows = c.graph.concat({k, c.graph.narrow(qkv, 2, 20, 12)}, 2);
                     c.graph.output("cache", c.graph.kv_write(cache, rows, pos));
                     c.inputs["qkv"] = quantize(random_floats(2 * 3 * 37, 81, -2.f, 2.f), dt);
                     c.inputs["pos"] = {0.f, 6.f};
                     return c;
                   },
                   [](const Values& in) {
                     const auto &qkv = in.at("qkv"), &pos = in.at("pos");
                     std::vector<double> cache(2 * 9 * 24, 0.0);
                     for (int b = 0; b < 2; ++b)
                       for (int i = 0; i < 3; ++i) {
                         const int t = int(pos[size_t(b)]) + i;
                         const float* row = qkv.data() + (b * 3 + i) * 37;
                         double* dst = cache.data() + (b * 9 + t) * 24;
                         for (int e = 0; e < 24; ++e) dst[e] = row[8 + e];
                         for (int h = 0; h < 2; ++h)
                           for (int j = 0; j < 2; ++j) {
                             const double angle = t * std::pow(300.0, -2.0 * j / 4.0);
                             const double a0 = row[8 + h * 6 + 2 * j], a1 = row[8 + h * 6 + 2 * j + 1];
                             dst[h * 6 + 2 * j] = a0 * std::cos(angle) - a1 * std::sin(angle);
                             dst[h * 6 + 2 * j + 1] = a1 * std::cos(angle) + a0 * std::sin(angle);
                           }
                       }
                     return std::map<std::string, std::vector<double>>{{"cache", cache}};
                   }});

  // all_reduce of one rank (no tensor-parallel group): the sum over one
  // rank is its own value, copied bit for bit.
  cases.push_back({"all_reduce_one_rank_5x129", "all_reduce",
                   [](DType dt) {
                     OpGraph c;
                     c.graph.output("out", c.graph.all_reduce(c.graph.input("x", {5, 129}, dt)));
                     c.inputs["x"] = quantize(random_floats(5 * 129, 85, -3.f, 3.f), dt);
                     return c;
                   },
                   [](const Values& in) {
                     const auto& x = in.at("x");
                     return Refs{{"out", std::vector<double>(x.begin(), x.end())}};
                   },
                   0.0, 0.0, 0.0, {}, true});

  // all_gather of one rank: its own value, bit for bit.
  cases.push_back({"all_gather_one_rank_3x5x7", "all_gather",
                   [](DType dt) {
                     OpGraph c;
                     c.graph.output("out", c.graph.all_gather(c.graph.input("x", {3, 5, 7}, dt), 1));
                     c.inputs["x"] = quantize(random_floats(3 * 5 * 7, 86, -3.f, 3.f), dt);
                     return c;
                   },
                   [](const Values& in) {
                     const auto& x = in.at("x");
                     return Refs{{"out", std::vector<double>(x.begin(), x.end())}};
                   },
                   0.0, 0.0, 0.0, {}, true});

  // Argmax over 133 columns of 7 rows: row 1 holds its maximum twice (the
  // lower index wins), row 2 is constant (index 0), row 3 holds NaN twice
  // (the first NaN wins), row 4 peaks in its last column.
  cases.push_back({"argmax", "argmax",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {7, 133}, dt);
                     c.graph.output("out", c.graph.argmax(x));
                     std::vector<float> v = quantize(random_floats(7 * 133, 80, -4.f, 4.f), dt);
                     v[size_t(133 + 40)] = v[size_t(133 + 97)] = 9.f;
                     for (int j = 0; j < 133; ++j) v[size_t(2 * 133 + j)] = -1.5f;
                     v[size_t(3 * 133 + 70)] = v[size_t(3 * 133 + 12)] = NAN;
                     v[size_t(3 * 133 + 5)] = 9.f;
                     v[size_t(4 * 133 + 132)] = 9.f;
                     c.inputs["x"] = v;
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     const auto& x = in.at("x");
                     for (int r = 0; r < 7; ++r) {
                       int best = 0;
                       for (int j = 1; j < 133; ++j) {
                         const float a = x[size_t(r * 133 + j)], b = x[size_t(r * 133 + best)];
                         if (std::isnan(b)) break;
                         if (std::isnan(a) || a > b) best = j;
                       }
                       out.push_back(best);
                     }
                     // The planted rows, independently of the loop above.
                     if (out[1] != 40 || out[2] != 0 || out[3] != 12 || out[4] != 132) out.assign(7, -1.0);
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   },
                   0.0});

  // Sampling over 301 columns of 6 rows (temperature 0.8, top-k 40, top-p
  // 0.9) at positions from an input; the reference is the host definition
  // (thunks/sample_math.h). Row 2 holds NaNs (as -inf), row 3 is all NaN
  // (token 0), row 4 holds +inf twice (the first wins). Exact; run again
  // reversed, so a replayed graph reads new logits and positions.
  cases.push_back({"sample", "sample",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {6, 301}, dt);
                     ValueId pos = c.graph.input("pos", {6}, DType::I32);
                     c.graph.output("out", c.graph.sample(x, pos, SampleAttrs{0.8f, 40, 0.9f, 1234}));
                     std::vector<float> v = quantize(random_floats(6 * 301, 81, -4.f, 4.f), dt);
                     for (int j = 0; j < 301; j += 3) v[size_t(2 * 301 + j)] = NAN;
                     for (int j = 0; j < 301; ++j) v[size_t(3 * 301 + j)] = NAN;
                     v[size_t(4 * 301 + 250)] = v[size_t(4 * 301 + 260)] = INFINITY;
                     c.inputs["x"] = v;
                     c.inputs["pos"] = {7.f, 0.f, 123456.f, 9.f, 3.f, 1000001.f};
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     const auto &x = in.at("x"), &pos = in.at("pos");
                     for (int r = 0; r < 6; ++r)
                       out.push_back(sample_row(x.data() + r * 301, 301, SampleSpec{0.8f, 40, 0.9f},
                                                sample_uniform(1234, int64_t(pos[size_t(r)]))));
                     // Independently of the definition: a NaN is never drawn, an all-NaN
                     // row gives 0, a row holding +inf its first +inf.
                     for (int r = 0; r < 6; ++r) {
                       const float* row = x.data() + r * 301;
                       const int first_inf = int(std::find(row, row + 301, INFINITY) - row);
                       const bool all_nan = std::all_of(row, row + 301, [](float f) { return std::isnan(f); });
                       const int want = all_nan ? 0 : first_inf < 301 ? first_inf : int(out[size_t(r)]);
                       if (out[size_t(r)] != want || (!all_nan && std::isnan(row[int(out[size_t(r)])]))) {
                         out.assign(6, -1.0);
                         break;
                       }
                     }
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   },
                   0.0, 0, 0, nullptr, true});

  // i32 add with a broadcast row (positions advanced on the device): exact,
  // past 2^24 where a float would round.
  cases.push_back({"add_i32", "binary",
                   [](DType) {
                     OpGraph c;
                     ValueId a = c.graph.input("a", {3, 5}, DType::I32);
                     ValueId b = c.graph.input("b", {5}, DType::I32);
                     c.graph.output("out", c.graph.sub(c.graph.add(a, b), c.graph.input("z", {3, 5}, DType::I32)));
                     std::vector<float> av, bv, zv;
                     for (int i = 0; i < 15; ++i) av.push_back(float(i * 7 - 30));
                     for (int j = 0; j < 5; ++j) bv.push_back(float(j * 3 + 1));
                     for (int i = 0; i < 15; ++i) zv.push_back(float(i % 4));
                     c.inputs["a"] = av;
                     c.inputs["b"] = bv;
                     c.inputs["z"] = zv;
                     return c;
                   },
                   [](const Values& in) {
                     std::vector<double> out;
                     for (int i = 0; i < 15; ++i)
                       out.push_back(double(in.at("a")[size_t(i)]) + in.at("b")[size_t(i % 5)] - in.at("z")[size_t(i)]);
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   },
                   0.0});

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
                           double qh[6];
                           for (int e = 0; e < 6; ++e) qh[e] = q[size_t((b * 3 + i) * 24 + h * 6 + e)];
                           ref_cache_head(qh, k, v, b, h / 2, int(pos[size_t(b)]) + i, double(0.41f),
                                          out.data() + (b * 3 + i) * 24 + h * 6);
                         }
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});

  // A decode step's attention with RoPE on q fused in: q is a 24-column slice
  // at 5 of a [2, 1, 40] row, 4 heads of 6 with 4 rotated (half-split) at
  // positions {3, 8}, GQA 4:2 over 10 keys, causal; it lowers to one
  // attention that rotates q as it reads it.
  cases.push_back({"attention_decode_rotated_q", "attention",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {2, 1, 40}, dt);
                     ValueId k = c.graph.input("k", {2, 10, 12}, dt);
                     ValueId v = c.graph.input("v", {2, 10, 12}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     RopeAttrs r;
                     r.heads = 4;
                     r.head_dim = 6;
                     r.n_rot = 4;
                     r.theta = 70.f;
                     r.pos_is_start = true;
                     AttentionAttrs a;
                     a.q_heads = 4;
                     a.kv_heads = 2;
                     a.head_dim = 6;
                     a.scale = 0.37f;
                     a.mask = MaskKind::Causal;
                     a.q_pos = true;
                     ValueId q = c.graph.rope(c.graph.narrow(x, 2, 5, 24), pos, r);
                     c.graph.output("out", c.graph.attention(q, k, v, -1, a, pos));
                     c.inputs["x"] = quantize(random_floats(2 * 40, 82, -2.f, 2.f), dt);
                     c.inputs["k"] = quantize(random_floats(2 * 10 * 12, 83, -2.f, 2.f), dt);
                     c.inputs["v"] = quantize(random_floats(2 * 10 * 12, 84, -2.f, 2.f), dt);
                     c.inputs["pos"] = {3.f, 8.f};
                     return c;
                   },
                   [](const Values& in) {
                     const auto &x = in.at("x"), &k = in.at("k"), &v = in.at("v"), &pos = in.at("pos");
                     std::vector<double> out(2 * 24, 0.0);
                     for (int b = 0; b < 2; ++b) {
                       const int last = int(pos[size_t(b)]);
                       for (int h = 0; h < 4; ++h) {
                         double q[6];
                         const float* xh = x.data() + b * 40 + 5 + h * 6;
                         for (int e = 0; e < 6; ++e) q[e] = xh[e];
                         for (int i = 0; i < 2; ++i) {
                           const double angle = last * std::pow(70.0, -2.0 * i / 4.0);
                           q[i] = xh[i] * std::cos(angle) - xh[i + 2] * std::sin(angle);
                           q[i + 2] = xh[i + 2] * std::cos(angle) + xh[i] * std::sin(angle);
                         }
                         ref_cache_head(q, k, v, b, h / 2, last, double(0.37f), out.data() + b * 24 + h * 6);
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

  // RoPE with per-pair frequency divisors (Llama 3 scaling): pair i of 4
  // turns at 500^(-2i/8) / div[i], interleaved pairs, positions {9, 30} + s.
  cases.push_back({"rope_freq_divisors", "rope",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {2, 3, 20}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     RopeAttrs a;
                     a.heads = 2;
                     a.head_dim = 10;
                     a.n_rot = 8;
                     a.theta = 500.f;
                     a.interleaved = true;
                     a.pos_is_start = true;
                     a.freq_divisors = {1.f, 2.5f, 8.f, 0.75f};
                     c.graph.output("out", c.graph.rope(x, pos, a));
                     c.inputs["x"] = quantize(random_floats(2 * 3 * 20, 85, -2.f, 2.f), dt);
                     c.inputs["pos"] = {9.f, 30.f};
                     return c;
                   },
                   [](const Values& in) {
                     const auto &x = in.at("x"), &pos = in.at("pos");
                     const double div[4] = {1.0, 2.5, 8.0, 0.75};
                     std::vector<double> out(x.begin(), x.end());
                     for (int b = 0; b < 2; ++b)
                       for (int s = 0; s < 3; ++s)
                         for (int h = 0; h < 2; ++h)
                           for (int i = 0; i < 4; ++i) {
                             const double angle = (pos[size_t(b)] + s) * std::pow(500.0, -2.0 * i / 8.0) / div[i];
                             const size_t base = size_t((b * 3 + s) * 20 + h * 10);
                             const double a0 = x[base + size_t(2 * i)], a1 = x[base + size_t(2 * i + 1)];
                             out[base + size_t(2 * i)] = a0 * std::cos(angle) - a1 * std::sin(angle);
                             out[base + size_t(2 * i + 1)] = a1 * std::cos(angle) + a0 * std::sin(angle);
                           }
                     return std::map<std::string, std::vector<double>>{{"out", out}};
                   }});
  add_rope_scaling_cases(cases);
  return cases;
}

}  // namespace rlx::test

#include "moe_op_cases.h"
#include "op_cases_rope_scaling.h"
