// Op cases of the mixture-of-experts thunks (moe_route, moe_matmul), in the
// shared table (op_cases.h): odd sizes, planted ties and invalid ids, a
// double-precision reference from the same inputs.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "quant_weights.h"
#include "test_util.h"

namespace rlx::test {

// Reference routing of one row: the k largest logits (NaN as -inf, the lower
// index first on ties) and their softmax weights, renormalised when norm.
inline void moe_route_reference(const float* row, int experts, int k, bool norm, std::vector<double>& ids,
                                std::vector<double>& weights) {
  auto key = [](float v) { return std::isnan(v) ? -INFINITY : double(v); };
  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(row[a]) > key(row[b]); });
  double mx = -INFINITY, sum = 0, chosen = 0;
  for (int e = 0; e < experts; ++e) mx = std::max(mx, key(row[e]));
  for (int e = 0; e < experts; ++e) sum += std::exp(key(row[e]) - mx);
  for (int j = 0; j < k; ++j) chosen += std::exp(key(row[order[size_t(j)]]) - mx) / sum;
  for (int j = 0; j < k; ++j) {
    const double w = std::exp(key(row[order[size_t(j)]]) - mx) / sum;
    ids.push_back(order[size_t(j)]);
    weights.push_back(norm ? w / chosen : w);
  }
}

// Two cases on one graph: the ids exactly (tol_scale 0), the weights within
// the dtype's bound. Row 1 holds a tie at the top, row 2 a NaN.
inline void add_moe_route_cases(std::vector<OpCase>& cases, const std::string& name, int rows, int experts, int k,
                                bool norm, uint64_t seed) {
  auto build = [=](DType dt) {
    OpGraph c;
    ValueId x = c.graph.input("logits", {rows, experts}, dt);
    auto [ids, weights] = c.graph.moe_route(x, MoeRouteAttrs{k, norm});
    c.graph.output("ids", ids);
    c.graph.output("weights", weights);
    std::vector<float> v = quantize(random_floats(size_t(rows * experts), seed, -3.f, 3.f), dt);
    if (rows > 1) v[size_t(experts + experts - 1)] = v[size_t(experts + 1)] = 5.f;  // tie: 1 before experts-1
    if (rows > 2) v[size_t(2 * experts)] = NAN;
    c.inputs["logits"] = v;
    return c;
  };
  auto reference = [=](const Values& in, bool want_ids) {
    std::vector<double> ids, weights;
    for (int r = 0; r < rows; ++r)
      moe_route_reference(in.at("logits").data() + r * experts, experts, k, norm, ids, weights);
    // The planted tie (where the inputs are not reversed), independently of the sort above.
    const auto& x = in.at("logits");
    const bool planted = rows > 1 && x[size_t(experts + 1)] == 5.f && x[size_t(2 * experts - 1)] == 5.f;
    if (planted && (ids[size_t(k)] != 1 || (k > 1 && ids[size_t(k + 1)] != experts - 1))) ids.assign(ids.size(), -1);
    return want_ids ? Refs{{"ids", ids}} : Refs{{"weights", weights}};
  };
  OpCase a{name + "_ids", "moe_route", build, [=](const Values& in) { return reference(in, true); }, 0.0};
  a.rerun_reversed = true;
  cases.push_back(a);
  OpCase b{name + "_weights", "moe_route", build, [=](const Values& in) { return reference(in, false); }};
  b.elem_scale = 1.0;
  cases.push_back(b);
}

// The moe_matmul cases' reference in double: x (in["x"]) times the experts
// w [experts, n, kin] its ids (in["ids"]) choose, weighted by in["weights"]
// and summed when `weighted`; an id outside [0, experts) gives zeros.
inline std::vector<double> moe_reference(const Values& in, const std::vector<float>& w, int rows, int top_k,
                                         int experts, int n, int kin, bool per_choice, bool weighted) {
  const auto &x = in.at("x"), &ids = in.at("ids");
  std::vector<double> out;
  for (int r = 0; r < rows; ++r) {
    std::vector<double> sum(size_t(n), 0.0);
    for (int j = 0; j < top_k; ++j) {
      const int e = int(ids[size_t(r * top_k + j)]);
      const float* xr = x.data() + (per_choice ? (r * top_k + j) * kin : r * kin);
      for (int c = 0; c < n; ++c) {
        double d = 0;
        if (e >= 0 && e < experts)
          for (int i = 0; i < kin; ++i) d += double(xr[i]) * w[size_t((int64_t(e) * n + c) * kin + i)];
        if (weighted) sum[size_t(c)] += in.at("weights")[size_t(r * top_k + j)] * d;
        else out.push_back(d);
      }
    }
    if (weighted) out.insert(out.end(), sum.begin(), sum.end());
  }
  return out;
}

// x [rows, kin] (or [rows, top_k, kin] when per_choice) times the experts
// [experts, n, kin] chosen by ids (an input here; one id is out of range and
// gives zeros), weighted and summed when `weighted`.
inline OpCase moe_matmul_case(const std::string& name, int rows, int top_k, int experts, int n, int kin,
                              bool per_choice, bool weighted, uint64_t seed) {
  OpCase oc;
  oc.name = name;
  oc.thunk = "moe_matmul";
  oc.build = [=](DType dt) {
    OpGraph c;
    const Shape xs = per_choice ? Shape{rows, top_k, kin} : Shape{rows, kin};
    ValueId x = c.graph.input("x", xs, dt);
    ValueId w = c.graph.input("w", {experts, n, kin}, dt);
    ValueId ids = c.graph.input("ids", {rows, top_k}, DType::I32);
    ValueId wt = weighted ? c.graph.input("weights", {rows, top_k}, dt) : -1;
    c.graph.output("out", c.graph.moe_matmul(x, w, ids, wt));
    c.inputs["x"] = quantize(random_floats(size_t(numel(xs)), seed), dt);
    c.inputs["w"] = quantize(random_floats(size_t(experts * n * kin), seed + 1), dt);
    std::vector<float> id = random_floats(size_t(rows * top_k), seed + 2, 0.f, float(experts) - 0.01f);
    for (float& v : id) v = std::floor(v);
    if (rows * top_k > 2) id[1] = float(experts);  // out of range: zeros
    c.inputs["ids"] = id;
    if (weighted) c.inputs["weights"] = quantize(random_floats(size_t(rows * top_k), seed + 3, 0.f, 1.f), dt);
    return c;
  };
  oc.reference = [=](const Values& in) {
    return Refs{{"out", moe_reference(in, in.at("w"), rows, top_k, experts, n, kin, per_choice, weighted)}};
  };
  oc.elem_scale = 3.0;
  oc.elem_scale_f32 = 10.0;
  // Reversed, the ids choose other experts: a replayed graph must read them anew.
  oc.rerun_reversed = true;
  return oc;
}

// The same over experts block-quantized as t (constants, as a model's params
// are): quants [experts, n, kin / per word], scales [experts, n, ...]; the
// reference multiplies the dequantized values in double.
inline OpCase moe_matmul_q_case(const std::string& name, QuantType t, int rows, int top_k, int experts, int n, int kin,
                                bool per_choice, bool weighted, uint64_t seed) {
  OpCase oc;
  oc.name = name;
  oc.thunk = "moe_matmul_q";
  const QuantWeight w = random_quant_weight(t, int64_t(experts) * n, kin, seed);
  oc.build = [=](DType dt) {
    OpGraph c;
    const Shape xs = per_choice ? Shape{rows, top_k, kin} : Shape{rows, kin};
    ValueId x = c.graph.input("x", xs, dt);
    const Shape qs = w.quants_shape(), ss = w.scales_shape();
    ValueId quants = c.graph.constant({experts, n, qs[1]}, DType::I32, w.quants);
    ValueId scales = c.graph.constant({experts, n, ss[1]}, DType::F16, w.scales);
    ValueId ids = c.graph.input("ids", {rows, top_k}, DType::I32);
    ValueId wt = weighted ? c.graph.input("weights", {rows, top_k}, dt) : -1;
    c.graph.output("out", c.graph.moe_matmul_q(x, quants, scales, t, ids, wt));
    c.inputs["x"] = quantize(random_floats(size_t(numel(xs)), seed + 1), dt);
    std::vector<float> id = random_floats(size_t(rows * top_k), seed + 2, 0.f, float(experts) - 0.01f);
    for (float& v : id) v = std::floor(v);
    if (rows * top_k > 2) id[1] = float(experts);  // out of range: zeros
    c.inputs["ids"] = id;
    if (weighted) c.inputs["weights"] = quantize(random_floats(size_t(rows * top_k), seed + 3, 0.f, 1.f), dt);
    return c;
  };
  oc.reference = [=](const Values& in) {
    return Refs{{"out", moe_reference(in, w.values, rows, top_k, experts, n, kin, per_choice, weighted)}};
  };
  oc.elem_scale = 4.0;  // sums of kin products; the CPU's x is int8 per block
  oc.elem_scale_f32 = 10.0;
  oc.rerun_reversed = true;
  return oc;
}

inline void add_moe_cases(std::vector<OpCase>& cases) {
  add_moe_route_cases(cases, "moe_route_9x5_top2_norm", 9, 5, 2, true, 301);
  add_moe_route_cases(cases, "moe_route_3x7_top1", 3, 7, 1, false, 302);
  add_moe_route_cases(cases, "moe_route_4x130_top8_norm", 4, 130, 8, true, 303);
  cases.push_back(moe_matmul_case("moe_matmul_7x2_e5_11x37", 7, 2, 5, 11, 37, false, false, 311));
  cases.push_back(moe_matmul_case("moe_matmul_per_choice_weighted_3x2_e5_24x64", 3, 2, 5, 24, 64, true, true, 312));
  cases.push_back(moe_matmul_case("moe_matmul_decode_weighted_1x3_e6_40x128", 1, 3, 6, 40, 128, false, true, 313));
  cases.push_back(moe_matmul_case("moe_matmul_per_choice_13x4_e9_19x48", 13, 4, 9, 19, 48, true, false, 314));
  cases.push_back(moe_matmul_q_case("moe_matmul_q_q8_0_7x2_e5_11x64", QuantType::Q8_0, 7, 2, 5, 11, 64, false, false,
                                    321));
  cases.push_back(moe_matmul_q_case("moe_matmul_q_q4_0_per_choice_weighted_3x2_e5_37x96", QuantType::Q4_0, 3, 2, 5, 37,
                                    96, true, true, 322));
  cases.push_back(moe_matmul_q_case("moe_matmul_q_q4_1_decode_weighted_1x3_e6_40x128", QuantType::Q4_1, 1, 3, 6, 40,
                                    128, false, true, 323));
  cases.push_back(moe_matmul_q_case("moe_matmul_q_fp8_weighted_5x2_e5_19x96", QuantType::FP8, 5, 2, 5, 19, 96, false,
                                    true, 324));
}

}  // namespace rlx::test
