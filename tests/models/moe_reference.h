// The sparse FFN of a mixture-of-experts layer in double precision, as
// transformers' Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock compute it:
// router logits, softmax over all experts, the top k (the lower index first
// on ties), renormalised when norm_topk_prob, each chosen expert's SwiGLU,
// weighted and summed. The reference llama_reference.h calls for sparse
// layers.
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "models/llama.h"

namespace rlx::test {

// The smallest gap seen between the k-th and the (k+1)-th router logit,
// relative to the largest |logit| of its token: a gap within a dtype's
// rounding can choose other experts in f16/bf16, which no logit tolerance
// covers (the tests reset it before a reference and read it after).
inline double& smallest_router_gap() {
  thread_local double gap = INFINITY;
  return gap;
}

inline std::vector<std::vector<double>> moe_ffn_reference(const LlamaConfig& c,
                                                          const std::map<std::string, std::vector<float>>& w,
                                                          const std::vector<std::vector<double>>& h,
                                                          const std::string& p) {
  const int H = c.hidden_size, E = c.num_experts, F = c.expert_ffn, K = c.experts_per_token;
  const auto &router = w.at(p + "ffn_gate_inp.weight"), &gate = w.at(p + "ffn_gate_exps.weight");
  const auto &up = w.at(p + "ffn_up_exps.weight"), &down = w.at(p + "ffn_down_exps.weight");
  std::vector<std::vector<double>> out(h.size(), std::vector<double>(size_t(H), 0.0));
  for (size_t s = 0; s < h.size(); ++s) {
    std::vector<double> logit(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e)
      for (int i = 0; i < H; ++i) logit[size_t(e)] += h[s][size_t(i)] * router[size_t(e * H + i)];
    const double mx = *std::max_element(logit.begin(), logit.end());
    double sum = 0;
    for (double v : logit) sum += std::exp(v - mx);
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logit[size_t(a)] > logit[size_t(b)]; });
    if (K < E) {
      double scale = 0;
      for (double v : logit) scale = std::max(scale, std::fabs(v));
      const double gap = (logit[size_t(order[size_t(K - 1)])] - logit[size_t(order[size_t(K)])]) / std::max(scale, 1e-30);
      smallest_router_gap() = std::min(smallest_router_gap(), gap);
    }
    double chosen = 0;
    for (int j = 0; j < K; ++j) chosen += std::exp(logit[size_t(order[size_t(j)])] - mx) / sum;
    for (int j = 0; j < K; ++j) {
      const int e = order[size_t(j)];
      double weight = std::exp(logit[size_t(e)] - mx) / sum;
      if (c.norm_topk_prob) weight /= chosen;
      std::vector<double> act(static_cast<size_t>(F));
      for (int f = 0; f < F; ++f) {
        double g = 0, u = 0;
        for (int i = 0; i < H; ++i) {
          g += h[s][size_t(i)] * gate[size_t((e * F + f) * H + i)];
          u += h[s][size_t(i)] * up[size_t((e * F + f) * H + i)];
        }
        act[size_t(f)] = g / (1 + std::exp(-g)) * u;
      }
      for (int o = 0; o < H; ++o) {
        double d = 0;
        for (int f = 0; f < F; ++f) d += act[size_t(f)] * down[size_t((e * H + o) * F + f)];
        out[s][size_t(o)] += weight * d;
      }
    }
  }
  return out;
}

}  // namespace rlx::test
