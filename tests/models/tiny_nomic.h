// A random NomicBERT of odd sizes written as nomic's checkpoints are
// (config.json with nomic's keys, vocab.txt, model.safetensors named
// emb_ln, encoder.layers.N.attn.Wqkv, mlp.fc11/fc12/fc2, norm1/norm2), and a
// plain double-precision forward of one unpadded text as the reference.
#pragma once
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "models/tiny_bert.h"

namespace rlx::test {

struct TinyNomicSpec {
  int vocab_words = 23;
  int hidden = 24, heads = 3, layers = 2, intermediate = 29, positions = 48, type_vocab = 2;
  double rotary_base = 1000.0;
  bool interleaved = false;
  bool biases = false;  // qkv_proj_bias, mlp_fc1_bias, mlp_fc2_bias
  std::string extra_config;  // more config.json members, starting with ","
  uint64_t seed = 11;
};

class TinyNomic {
 public:
  explicit TinyNomic(const TinyNomicSpec& s) : s_(s) {
    const int H = s.hidden, I = s.intermediate;
    uint64_t seed = s.seed;
    auto rand = [&](const std::string& name, Shape shape, float lo, float hi) {
      w_[name] = {shape, random_floats(size_t(numel(shape)), ++seed, lo, hi)};
    };
    rand("embeddings.word_embeddings.weight", {vocab(), H}, -1.f, 1.f);
    rand("embeddings.token_type_embeddings.weight", {s.type_vocab, H}, -0.5f, 0.5f);
    rand("emb_ln.weight", {H}, 0.7f, 1.3f);
    rand("emb_ln.bias", {H}, -0.2f, 0.2f);
    const float a = 1.2f / std::sqrt(float(H)), f = 1.2f / std::sqrt(float(I));
    for (int l = 0; l < s.layers; ++l) {
      const std::string p = "encoder.layers." + std::to_string(l) + ".";
      rand(p + "attn.Wqkv.weight", {3 * H, H}, -a, a);
      rand(p + "attn.out_proj.weight", {H, H}, -a, a);
      rand(p + "mlp.fc11.weight", {I, H}, -a, a);
      rand(p + "mlp.fc12.weight", {I, H}, -a, a);
      rand(p + "mlp.fc2.weight", {H, I}, -f, f);
      if (s.biases) {
        rand(p + "attn.Wqkv.bias", {3 * H}, -0.1f, 0.1f);
        rand(p + "attn.out_proj.bias", {H}, -0.1f, 0.1f);
        rand(p + "mlp.fc11.bias", {I}, -0.1f, 0.1f);
        rand(p + "mlp.fc12.bias", {I}, -0.1f, 0.1f);
        rand(p + "mlp.fc2.bias", {H}, -0.1f, 0.1f);
      }
      for (const char* n : {"norm1", "norm2"}) {
        rand(p + n + ".weight", {H}, 0.7f, 1.3f);
        rand(p + n + ".bias", {H}, -0.2f, 0.2f);
      }
    }
  }

  int vocab() const { return 5 + s_.vocab_words; }  // BERT's WordPiece: 5 special tokens, then the words
  std::vector<int32_t> ids_of(const std::vector<int>& words) const {
    std::vector<int32_t> ids{TinyBert::kCls};
    for (int k : words) ids.push_back(5 + k);
    ids.push_back(TinyBert::kSep);
    return ids;
  }

  void write(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    auto n = [](auto v) { return std::to_string(v); };
    const std::string b = s_.biases ? "true" : "false";
    write_text(dir / "config.json",
               "{\"model_type\":\"nomic_bert\",\"architectures\":[\"NomicBertModel\"],\"vocab_size\":" + n(vocab()) +
                   ",\"n_embd\":" + n(s_.hidden) + ",\"n_head\":" + n(s_.heads) + ",\"n_layer\":" + n(s_.layers) +
                   ",\"n_inner\":" + n(s_.intermediate) + ",\"n_positions\":" + n(s_.positions) +
                   ",\"type_vocab_size\":" + n(s_.type_vocab) +
                   ",\"activation_function\":\"swiglu\",\"layer_norm_epsilon\":1e-12,\"rotary_emb_fraction\":1.0"
                   ",\"rotary_emb_base\":" + std::to_string(s_.rotary_base) + ",\"rotary_emb_interleaved\":" +
                   (s_.interleaved ? "true" : "false") + ",\"qkv_proj_bias\":" + b + ",\"mlp_fc1_bias\":" + b +
                   ",\"mlp_fc2_bias\":" + b + ",\"prenorm\":false,\"causal\":false,\"rotary_emb_scale_base\":null" +
                   s_.extra_config + "}");
    std::string vocab_txt = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int k = 0; k < s_.vocab_words; ++k) vocab_txt += TinyBert::word(k) + "\n";
    write_text(dir / "vocab.txt", vocab_txt);
    write_safetensors(dir / "model.safetensors", w_);
  }

  // Hidden states [tokens][hidden] of one unpadded text (all token type 0).
  std::vector<std::vector<double>> hidden(const std::vector<int32_t>& ids) const {
    const size_t S = ids.size(), H = size_t(s_.hidden), I = size_t(s_.intermediate);
    const size_t heads = size_t(s_.heads), hd = H / heads;
    std::vector<std::vector<double>> x(S, std::vector<double>(H));
    for (size_t t = 0; t < S; ++t)
      for (size_t d = 0; d < H; ++d)
        x[t][d] = at("embeddings.word_embeddings.weight", size_t(ids[t]) * H + d) +
                  at("embeddings.token_type_embeddings.weight", d);
    norm(x, "emb_ln");
    for (int l = 0; l < s_.layers; ++l) {
      const std::string p = "encoder.layers." + std::to_string(l) + ".";
      auto qkv = dense(x, p + "attn.Wqkv", 3 * H);
      std::vector<std::vector<double>> q(S), k(S), v(S);
      for (size_t t = 0; t < S; ++t) {
        q[t].assign(qkv[t].begin(), qkv[t].begin() + long(H));
        k[t].assign(qkv[t].begin() + long(H), qkv[t].begin() + long(2 * H));
        v[t].assign(qkv[t].begin() + long(2 * H), qkv[t].end());
        rotate(q[t], t, heads, hd);
        rotate(k[t], t, heads, hd);
      }
      std::vector<std::vector<double>> ctx(S, std::vector<double>(H, 0.0));
      for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < S; ++i) {
          std::vector<double> sc(S);
          double mx = -1e300;
          for (size_t j = 0; j < S; ++j) {
            double dot = 0;
            for (size_t d = 0; d < hd; ++d) dot += q[i][h * hd + d] * k[j][h * hd + d];
            sc[j] = dot / std::sqrt(double(hd));
            mx = std::max(mx, sc[j]);
          }
          double z = 0;
          for (double& e : sc) z += (e = std::exp(e - mx));
          for (size_t j = 0; j < S; ++j)
            for (size_t d = 0; d < hd; ++d) ctx[i][h * hd + d] += sc[j] / z * v[j][h * hd + d];
        }
      auto o = dense(ctx, p + "attn.out_proj", H);
      for (size_t t = 0; t < S; ++t)
        for (size_t d = 0; d < H; ++d) x[t][d] += o[t][d];
      norm(x, p + "norm1");
      auto up = dense(x, p + "mlp.fc11", I), gate = dense(x, p + "mlp.fc12", I);
      for (size_t t = 0; t < S; ++t)
        for (size_t d = 0; d < I; ++d) up[t][d] *= gate[t][d] / (1.0 + std::exp(-gate[t][d]));
      auto f = dense(up, p + "mlp.fc2", H);
      for (size_t t = 0; t < S; ++t)
        for (size_t d = 0; d < H; ++d) x[t][d] += f[t][d];
      norm(x, p + "norm2");
    }
    return x;
  }

 private:
  double at(const std::string& name, size_t i) const { return w_.at(name).second.at(i); }
  bool has(const std::string& name) const { return w_.count(name) > 0; }
  // Rotary positions: pair (i, i + hd/2) of each head (or (2i, 2i+1)
  // interleaved) turned by t * base^(-2i/hd).
  void rotate(std::vector<double>& r, size_t t, size_t heads, size_t hd) const {
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < hd / 2; ++i) {
        const double angle = double(t) * std::pow(s_.rotary_base, -2.0 * double(i) / double(hd));
        const size_t a = h * hd + (s_.interleaved ? 2 * i : i), b = h * hd + (s_.interleaved ? 2 * i + 1 : i + hd / 2);
        const double x1 = r[a], x2 = r[b];
        r[a] = x1 * std::cos(angle) - x2 * std::sin(angle);
        r[b] = x2 * std::cos(angle) + x1 * std::sin(angle);
      }
  }
  std::vector<std::vector<double>> dense(const std::vector<std::vector<double>>& x, const std::string& name,
                                         size_t out) const {
    const size_t in = x[0].size();
    const bool bias = has(name + ".bias");
    std::vector<std::vector<double>> y(x.size(), std::vector<double>(out));
    for (size_t t = 0; t < x.size(); ++t)
      for (size_t o = 0; o < out; ++o) {
        double acc = bias ? at(name + ".bias", o) : 0.0;
        for (size_t i = 0; i < in; ++i) acc += x[t][i] * at(name + ".weight", o * in + i);
        y[t][o] = acc;
      }
    return y;
  }
  void norm(std::vector<std::vector<double>>& x, const std::string& name) const {
    for (auto& r : x) {
      double mean = 0, var = 0;
      for (double e : r) mean += e;
      mean /= double(r.size());
      for (double e : r) var += (e - mean) * (e - mean);
      var /= double(r.size());
      for (size_t d = 0; d < r.size(); ++d)
        r[d] = (r[d] - mean) / std::sqrt(var + 1e-12) * at(name + ".weight", d) + at(name + ".bias", d);
    }
  }

  TinyNomicSpec s_;
  Tensors w_;
};

}  // namespace rlx::test
