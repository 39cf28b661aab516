// A LLaMA forward pass in plain double-precision C++ (Hugging Face layout,
// RoPE rotating halves), random weights for a graph's params and GGUF's Q/K
// row order: the independent reference the LLaMA tests compare with. The
// family switches as transformers applies them: Qwen2's q/k/v biases,
// Qwen3's per-head q/k RMSNorm, rope frequency divisors (Llama 3 scaling,
// YaRN, LongRoPE's short factors: a test wanting the long ones puts them in
// rope_freq_divisors) and the attention factor on cos and sin,
// and Gemma's: embeddings times sqrt(hidden), post-norms on each block's
// output, GeGLU (tanh GELU), attention and final soft caps, sliding-window
// layers with their own rope base, query_pre_attn_scalar.
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/moe_reference.h"
#include "test_util.h"

namespace rlx::test {

// An odd shape: GQA 6:2 heads, head_dim 48, FFN 776, tied embeddings.
inline LlamaConfig odd_config() {
  LlamaConfig c;
  c.vocab_size = 301;
  c.hidden_size = 288;
  c.intermediate_size = 776;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_dim = 48;
  c.rope_dims = 48;
  c.rope_theta = 10000.f;
  c.rms_eps = 1e-5f;
  c.max_positions = 64;
  c.tie_embeddings = true;
  return c;
}

using Weights = std::map<std::string, std::vector<float>>;

inline Weights random_weights(const Graph& g) {
  Weights w;
  uint64_t seed = 100;
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::Param) continue;
    const Shape& s = g.value(n.outputs[0]).shape;
    if (s.size() == 1) w[n.name] = test::random_floats(size_t(s[0]), seed++, 0.8f, 1.2f);  // norm gains
    else w[n.name] = test::random_floats(size_t(numel(s)), seed++, -0.08f, 0.08f);
  }
  return w;
}

// GGUF's order of a Q or K weight: per head, row 2i + half holds HF's row half * hd/2 + i.
inline std::vector<float> to_gguf_rows(const std::vector<float>& w, int heads, int hd, int64_t cols) {
  std::vector<float> out(w.size());
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < hd / 2; ++i)
      for (int half = 0; half < 2; ++half)
        std::copy_n(&w[size_t((h * hd + half * hd / 2 + i) * cols)], cols, &out[size_t((h * hd + 2 * i + half) * cols)]);
  return out;
}

// Phi-3's fused weights as the separate ones they stack: attn_qkv rows are
// Q, K then V; ffn_up's (2 * intermediate rows) the gate's, then up's.
inline Weights split_fused(const LlamaConfig& c, const Weights& w) {
  Weights out = w;
  const size_t H = size_t(c.hidden_size), F = size_t(c.intermediate_size);
  const size_t q = size_t(c.num_heads * c.head_dim), kv = size_t(c.num_kv_heads * c.head_dim);
  auto rows = [&](const std::vector<float>& m, size_t from, size_t n) {
    return std::vector<float>(m.begin() + long(from * H), m.begin() + long((from + n) * H));
  };
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const auto qkv = w.at(p + "attn_qkv.weight"), gate_up = w.at(p + "ffn_up.weight");
    out.erase(p + "attn_qkv.weight");
    out[p + "attn_q.weight"] = rows(qkv, 0, q);
    out[p + "attn_k.weight"] = rows(qkv, q, kv);
    out[p + "attn_v.weight"] = rows(qkv, q + kv, kv);
    out[p + "ffn_gate.weight"] = rows(gate_up, 0, F);
    out[p + "ffn_up.weight"] = rows(gate_up, F, F);
  }
  return out;
}

// Logits [vocab] at position `last` of one sequence, in double, HF layout.
inline std::vector<double> reference(const LlamaConfig& c, const Weights& w, const std::vector<int32_t>& ids, int last) {
  if (c.fused_qkv_gate_up) {
    LlamaConfig separate = c;
    separate.fused_qkv_gate_up = false;
    return reference(separate, split_fused(c, w), ids, last);
  }
  const int S = last + 1, H = c.hidden_size, F = c.intermediate_size, hd = c.head_dim;
  const int nh = c.num_heads, nkv = c.num_kv_heads, group = nh / nkv;
  using Mat = std::vector<std::vector<double>>;
  auto linear = [&](const Mat& x, const std::string& name, int out, int in) {
    const auto& W = w.at(name);
    Mat y(x.size(), std::vector<double>(size_t(out)));
    for (size_t s = 0; s < x.size(); ++s)
      for (int o = 0; o < out; ++o) {
        double a = 0;
        for (int i = 0; i < in; ++i) a += x[s][size_t(i)] * W[size_t(o) * size_t(in) + size_t(i)];
        y[s][size_t(o)] = a;
      }
    return y;
  };
  auto rms = [&](const Mat& x, const std::string& name) {
    Mat y = x;
    for (auto& row : y) {
      double ss = 0;
      for (double v : row) ss += v * v;
      double inv = 1.0 / std::sqrt(ss / H + c.rms_eps);
      for (int i = 0; i < H; ++i) row[size_t(i)] *= inv * w.at(name)[size_t(i)];
    }
    return y;
  };
  auto add_bias = [&](Mat& x, const std::string& name) {
    for (auto& row : x)
      for (size_t i = 0; i < row.size(); ++i) row[i] += w.at(name)[i];
  };
  auto head_rms = [&](Mat& x, int heads, const std::string& name) {
    for (auto& row : x)
      for (int h = 0; h < heads; ++h) {
        double ss = 0;
        for (int i = 0; i < hd; ++i) ss += row[size_t(h * hd + i)] * row[size_t(h * hd + i)];
        const double inv = 1.0 / std::sqrt(ss / hd + c.rms_eps);
        for (int i = 0; i < hd; ++i) row[size_t(h * hd + i)] *= inv * w.at(name)[size_t(i)];
      }
  };
  auto rope = [&](Mat& x, int heads, bool local) {
    const bool own = local && c.local_rope_theta > 0;  // a local base, unscaled
    const double theta = own ? double(c.local_rope_theta) : double(c.rope_theta);
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hd / 2; ++i) {
          const double div = c.rope_freq_divisors.empty() || own ? 1.0 : double(c.rope_freq_divisors[size_t(i)]);
          double ang = s * std::pow(theta, -2.0 * i / hd) / div;
          // YaRN / LongRoPE: cos and sin times the attention factor (global layers only).
          const double af = own ? 1.0 : double(c.rope_attention_factor);
          double& a = x[size_t(s)][size_t(h * hd + i)];
          double& b = x[size_t(s)][size_t(h * hd + i + hd / 2)];
          double x1 = a, x2 = b;
          a = af * (x1 * std::cos(ang) - x2 * std::sin(ang));
          b = af * (x2 * std::cos(ang) + x1 * std::sin(ang));
        }
  };
  const auto& E = w.at("token_embd.weight");
  Mat x(static_cast<size_t>(S), std::vector<double>(static_cast<size_t>(H)));
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < H; ++i) x[size_t(s)][size_t(i)] = E[size_t(ids[size_t(s)]) * size_t(H) + size_t(i)];
  // Gemma's normalizer: sqrt(hidden) as a float32 tensor (the f32 model's dtype).
  if (c.embed_scale > 0)
    for (auto& row : x)
      for (double& e : row) e *= double(float(std::sqrt(double(H))));
  const double scale = c.query_scale > 0 ? double(c.query_scale) : 1.0 / std::sqrt(double(hd));
  auto softcap = [](double v, double cap) { return cap > 0 ? cap * std::tanh(v / cap) : v; };
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool local = !c.local_layers.empty() && c.local_layers[size_t(l)] && c.sliding_window > 0;
    Mat h = rms(x, p + "attn_norm.weight");
    Mat q = linear(h, p + "attn_q.weight", nh * hd, H), k = linear(h, p + "attn_k.weight", nkv * hd, H);
    Mat v = linear(h, p + "attn_v.weight", nkv * hd, H);
    if (c.qkv_bias) {
      add_bias(q, p + "attn_q.bias");
      add_bias(k, p + "attn_k.bias");
      add_bias(v, p + "attn_v.bias");
    }
    if (c.qk_norm) {
      head_rms(q, nh, p + "attn_q_norm.weight");
      head_rms(k, nkv, p + "attn_k_norm.weight");
    }
    rope(q, nh, local);
    rope(k, nkv, local);
    Mat ctx(static_cast<size_t>(S), std::vector<double>(static_cast<size_t>(nh * hd)));
    for (int s = 0; s < S; ++s)
      for (int hh = 0; hh < nh; ++hh) {
        const int kv = hh / group;
        std::vector<double> sc(size_t(s + 1));
        double mx = -1e300, sum = 0;
        for (int t = 0; t <= s; ++t) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[size_t(s)][size_t(hh * hd + i)] * k[size_t(t)][size_t(kv * hd + i)];
          sc[size_t(t)] = softcap(d * scale, c.attn_softcap);
          // A local layer's query at s sees keys in (s - window, s].
          if (local && t <= s - c.sliding_window) sc[size_t(t)] = -1e300;
          mx = std::max(mx, sc[size_t(t)]);
        }
        for (double& e : sc) sum += e = e == -1e300 ? 0.0 : std::exp(e - mx);
        for (int t = 0; t <= s; ++t)
          for (int i = 0; i < hd; ++i)
            ctx[size_t(s)][size_t(hh * hd + i)] += sc[size_t(t)] / sum * v[size_t(t)][size_t(kv * hd + i)];
      }
    Mat o = linear(ctx, p + "attn_output.weight", H, nh * hd);
    if (c.sandwich_norms) o = rms(o, p + "post_attention_norm.weight");
    for (int s = 0; s < S; ++s)
      for (int i = 0; i < H; ++i) x[size_t(s)][size_t(i)] += o[size_t(s)][size_t(i)];
    h = rms(x, p + "ffn_norm.weight");
    if (c.is_moe_layer(l)) {  // a router and its experts (moe_reference.h)
      const Mat d = moe_ffn_reference(c, w, h, p);
      for (int s = 0; s < S; ++s)
        for (int i = 0; i < H; ++i) x[size_t(s)][size_t(i)] += d[size_t(s)][size_t(i)];
      continue;
    }
    Mat g = linear(h, p + "ffn_gate.weight", F, H), u = linear(h, p + "ffn_up.weight", F, H);
    for (int s = 0; s < S; ++s)
      for (int i = 0; i < F; ++i) {
        double a = g[size_t(s)][size_t(i)];
        const double act = c.gelu_tanh_ffn
                               ? 0.5 * a * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (a + 0.044715 * a * a * a)))
                               : a / (1 + std::exp(-a));
        g[size_t(s)][size_t(i)] = act * u[size_t(s)][size_t(i)];
      }
    Mat d = linear(g, p + "ffn_down.weight", H, F);
    if (c.sandwich_norms) d = rms(d, p + "post_ffw_norm.weight");
    for (int s = 0; s < S; ++s)
      for (int i = 0; i < H; ++i) x[size_t(s)][size_t(i)] += d[size_t(s)][size_t(i)];
  }
  Mat last_row = rms(Mat{x[size_t(last)]}, "output_norm.weight");
  // The head is the embedding (tied) unless the weights give output.weight.
  std::vector<double> logits =
      linear(last_row, w.count("output.weight") ? "output.weight" : "token_embd.weight", c.vocab_size, H)[0];
  for (double& v : logits) v = softcap(v, c.final_softcap);
  return logits;
}

}  // namespace rlx::test
