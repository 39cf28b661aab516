// A random BERT of odd sizes written as a real Hugging Face directory
// (config.json, vocab.txt, model.safetensors, sentence-transformers files),
// and a plain double-precision forward of it, one text at a time with no
// padding, as the reference the embedder is compared against.
#pragma once
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "models/test_files.h"
#include "test_util.h"

namespace rlx::test {

struct TinyBertSpec {
  int vocab_words = 23;  // "ba", "be", ... after the 5 special tokens
  int hidden = 20, heads = 4, layers = 2, intermediate = 27, positions = 40, type_vocab = 2;
  double eps = 1e-12;
  bool classifier = false;  // BertForSequenceClassification with one label
  std::string extra_config;  // more config.json members, starting with ","
  uint64_t seed = 7;
};

using Tensors = std::map<std::string, std::pair<Shape, std::vector<float>>>;

class TinyBert {
 public:
  explicit TinyBert(const TinyBertSpec& s) : s_(s) {
    const int H = s.hidden, I = s.intermediate;
    uint64_t seed = s.seed;
    auto rand = [&](const std::string& name, Shape shape, float lo, float hi) {
      w_[name] = {shape, random_floats(size_t(numel(shape)), ++seed, lo, hi)};
    };
    const float a = 0.6f;
    rand("embeddings.word_embeddings.weight", {vocab(), H}, -1.f, 1.f);
    rand("embeddings.position_embeddings.weight", {s.positions, H}, -0.5f, 0.5f);
    rand("embeddings.token_type_embeddings.weight", {s.type_vocab, H}, -0.5f, 0.5f);
    rand("embeddings.LayerNorm.weight", {H}, 0.7f, 1.3f);
    rand("embeddings.LayerNorm.bias", {H}, -0.2f, 0.2f);
    for (int l = 0; l < s.layers; ++l) {
      const std::string p = "encoder.layer." + std::to_string(l) + ".";
      for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value",
                            "attention.output.dense"}) {
        rand(p + m + ".weight", {H, H}, -a / std::sqrt(float(H)) * 2, a / std::sqrt(float(H)) * 2);
        rand(p + m + ".bias", {H}, -0.1f, 0.1f);
      }
      rand(p + "intermediate.dense.weight", {I, H}, -2 * a / std::sqrt(float(H)), 2 * a / std::sqrt(float(H)));
      rand(p + "intermediate.dense.bias", {I}, -0.1f, 0.1f);
      rand(p + "output.dense.weight", {H, I}, -2 * a / std::sqrt(float(I)), 2 * a / std::sqrt(float(I)));
      rand(p + "output.dense.bias", {H}, -0.1f, 0.1f);
      for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
        rand(p + n + ".weight", {H}, 0.7f, 1.3f);
        rand(p + n + ".bias", {H}, -0.2f, 0.2f);
      }
    }
    rand("pooler.dense.weight", {H, H}, -0.4f, 0.4f);
    rand("pooler.dense.bias", {H}, -0.1f, 0.1f);
    if (s.classifier) {
      rand("classifier.weight", {1, H}, -0.5f, 0.5f);
      rand("classifier.bias", {1}, -0.2f, 0.2f);
    }
  }

  int vocab() const { return 5 + s_.vocab_words; }
  // Word k of the vocabulary: two or three lowercase letters, each one token.
  static std::string word(int k) {
    const char* c = "bcdfghjklmnpqrstvwxz";
    const char* v = "aeiou";
    std::string w{c[k % 20], v[(k / 20) % 5]};
    if (k >= 100) w += c[(k / 100) % 20];
    return w;
  }
  int32_t id(int k) const { return 5 + k; }
  static constexpr int32_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3;

  // Writes config.json, vocab.txt and model.safetensors ("bert." prefixed).
  void write(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    std::string arch = s_.classifier ? "BertForSequenceClassification" : "BertModel";
    write_text(dir / "config.json",
               "{\"model_type\":\"bert\",\"architectures\":[\"" + arch + "\"],\"vocab_size\":" +
                   std::to_string(vocab()) + ",\"hidden_size\":" + std::to_string(s_.hidden) +
                   ",\"num_hidden_layers\":" + std::to_string(s_.layers) + ",\"num_attention_heads\":" +
                   std::to_string(s_.heads) + ",\"intermediate_size\":" + std::to_string(s_.intermediate) +
                   ",\"max_position_embeddings\":" + std::to_string(s_.positions) + ",\"type_vocab_size\":" +
                   std::to_string(s_.type_vocab) + ",\"hidden_act\":\"gelu\",\"layer_norm_eps\":1e-12" +
                   (s_.classifier ? ",\"id2label\":{\"0\":\"LABEL_0\"}" : "") + s_.extra_config + "}");
    std::string vocab_txt = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int k = 0; k < s_.vocab_words; ++k) vocab_txt += word(k) + "\n";
    write_text(dir / "vocab.txt", vocab_txt);
    Tensors file;
    for (const auto& [name, t] : w_) file[(name.rfind("classifier.", 0) == 0 ? "" : "bert.") + name] = t;
    write_safetensors(dir / "model.safetensors", file);
  }

  // Hidden states [tokens][hidden] of one unpadded text.
  std::vector<std::vector<double>> hidden(const std::vector<int32_t>& ids, const std::vector<int32_t>& types) const {
    const size_t S = ids.size(), H = size_t(s_.hidden), I = size_t(s_.intermediate);
    const size_t heads = size_t(s_.heads), hd = H / heads;
    std::vector<std::vector<double>> x(S, std::vector<double>(H));
    for (size_t t = 0; t < S; ++t)
      for (size_t d = 0; d < H; ++d)
        x[t][d] = at("embeddings.word_embeddings.weight", size_t(ids[t]) * H + d) +
                  at("embeddings.position_embeddings.weight", t * H + d) +
                  at("embeddings.token_type_embeddings.weight", size_t(types[t]) * H + d);
    norm(x, "embeddings.LayerNorm");
    for (int l = 0; l < s_.layers; ++l) {
      const std::string p = "encoder.layer." + std::to_string(l) + ".";
      auto q = dense(x, p + "attention.self.query", H), k = dense(x, p + "attention.self.key", H),
           v = dense(x, p + "attention.self.value", H);
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
      auto o = dense(ctx, p + "attention.output.dense", H);
      for (size_t t = 0; t < S; ++t)
        for (size_t d = 0; d < H; ++d) x[t][d] += o[t][d];
      norm(x, p + "attention.output.LayerNorm");
      auto f = dense(x, p + "intermediate.dense", I);
      for (auto& r : f)
        for (double& e : r) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
      auto f2 = dense(f, p + "output.dense", H);
      for (size_t t = 0; t < S; ++t)
        for (size_t d = 0; d < H; ++d) x[t][d] += f2[t][d];
      norm(x, p + "output.LayerNorm");
    }
    return x;
  }

  // sentence-transformers' Pooling on one unpadded text.
  std::vector<double> pool(const std::vector<std::vector<double>>& x, const std::string& mode) const {
    const size_t S = x.size(), H = x[0].size();
    std::vector<double> out(H, 0.0);
    if (mode == "cls") return x[0];
    if (mode == "lasttoken") return x[S - 1];
    if (mode == "max") {
      out = x[0];
      for (size_t t = 1; t < S; ++t)
        for (size_t d = 0; d < H; ++d) out[d] = std::max(out[d], x[t][d]);
      return out;
    }
    double total = 0;
    for (size_t t = 0; t < S; ++t) {
      double w = mode == "weightedmean" ? double(t + 1) : 1.0;
      total += w;
      for (size_t d = 0; d < H; ++d) out[d] += w * x[t][d];
    }
    double div = mode == "mean_sqrt_len" ? std::sqrt(double(S)) : total;
    for (double& e : out) e /= div;
    return out;
  }

  // The cross-encoder's logit: classifier(tanh(pooler(x[0]))).
  double logit(const std::vector<int32_t>& ids, const std::vector<int32_t>& types) const {
    auto x = hidden(ids, types);
    auto pooled = dense({x[0]}, "pooler.dense", size_t(s_.hidden))[0];
    for (double& e : pooled) e = std::tanh(e);
    return dense({pooled}, "classifier", 1)[0][0];
  }

  // [CLS] words [SEP] for words given by index.
  std::vector<int32_t> ids_of(const std::vector<int>& words) const {
    std::vector<int32_t> ids{kCls};
    for (int k : words) ids.push_back(id(k));
    ids.push_back(kSep);
    return ids;
  }
  static std::string text_of(const std::vector<int>& words) {
    std::string s;
    for (int k : words) s += (s.empty() ? "" : " ") + word(k);
    return s;
  }

 private:
  double at(const std::string& name, size_t i) const { return w_.at(name).second.at(i); }
  std::vector<std::vector<double>> dense(const std::vector<std::vector<double>>& x, const std::string& name,
                                         size_t out) const {
    const size_t in = x[0].size();
    std::vector<std::vector<double>> y(x.size(), std::vector<double>(out));
    for (size_t t = 0; t < x.size(); ++t)
      for (size_t o = 0; o < out; ++o) {
        double acc = at(name + ".bias", o);
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
        r[d] = (r[d] - mean) / std::sqrt(var + s_.eps) * at(name + ".weight", d) + at(name + ".bias", d);
    }
  }

  TinyBertSpec s_;
  Tensors w_;
};

// modules.json (Transformer, Pooling, optionally Normalize) and the pooling
// module's config with one mode ("mean", "cls", "max", ...).
inline void write_sentence_modules(const std::filesystem::path& dir, const std::string& mode, bool normalize) {
  std::string modules =
      R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)"
      R"({"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"})";
  if (normalize) modules += R"(,{"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"})";
  write_text(dir / "modules.json", modules + "]");
  const std::string key = mode == "cls"             ? "pooling_mode_cls_token"
                          : mode == "max"           ? "pooling_mode_max_tokens"
                          : mode == "mean_sqrt_len" ? "pooling_mode_mean_sqrt_len_tokens"
                          : mode == "weightedmean"  ? "pooling_mode_weightedmean_tokens"
                          : mode == "lasttoken"     ? "pooling_mode_lasttoken"
                                                    : "pooling_mode_mean_tokens";
  write_text(dir / "1_Pooling" / "config.json", "{\"" + key + "\": true}");
}

inline std::vector<double> l2_normalized(std::vector<double> v) {
  double n = 0;
  for (double e : v) n += e * e;
  n = std::max(std::sqrt(n), 1e-12);
  for (double& e : v) e /= n;
  return v;
}

}  // namespace rlx::test
