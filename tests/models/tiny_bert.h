// A random BERT of odd sizes written as a real Hugging Face directory
// (config.json, vocab.txt, model.safetensors, sentence-transformers files),
// and a plain double-precision forward of it, one text at a time with no
// padding, as the reference the embedder is compared against.
#pragma once
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "models/test_files.h"
#include "test_util.h"

namespace rlx::test {

struct TinyBertSpec {
  std::string family = "bert";  // bert, roberta, xlm-roberta or distilbert
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
    if (roberta()) s_.type_vocab = 1;
    const int H = s.hidden, I = s.intermediate;
    uint64_t seed = s.seed;
    auto rand = [&](const std::string& name, Shape shape, float lo, float hi) {
      w_[name] = {shape, random_floats(size_t(numel(shape)), ++seed, lo, hi)};
    };
    const float a = 0.6f;
    rand("embeddings.word_embeddings.weight", {vocab(), H}, -1.f, 1.f);
    rand("embeddings.position_embeddings.weight", {s.positions, H}, -0.5f, 0.5f);
    if (!distil()) rand("embeddings.token_type_embeddings.weight", {s_.type_vocab, H}, -0.5f, 0.5f);
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

  // XLM-R is RoBERTa's model with a SentencePiece Unigram tokenizer.
  bool roberta() const { return s_.family == "roberta" || xlmr(); }
  bool xlmr() const { return s_.family == "xlm-roberta"; }
  bool distil() const { return s_.family == "distilbert"; }
  // BERT's WordPiece: 5 special tokens then the words. RoBERTa's BPE: 4
  // special tokens, 26 letters, "Ġ", then each word and "Ġ" + word. XLM-R's
  // Unigram: 4 special tokens, "▁" + each word, then 26 letters.
  int vocab() const {
    return xlmr() ? 4 + s_.vocab_words + 26 : roberta() ? 31 + 2 * s_.vocab_words : 5 + s_.vocab_words;
  }
  // Word k of the vocabulary: two or three lowercase letters, each one token.
  static std::string word(int k) {
    const char* c = "bcdfghjklmnpqrstvwxz";
    const char* v = "aeiou";
    std::string w{c[k % 20], v[(k / 20) % 5]};
    if (k >= 100) w += c[(k / 100) % 20];
    return w;
  }
  // The id of word k; for RoBERTa, `spaced` is the "Ġ" form a word after a space takes.
  int32_t id(int k, bool spaced = false) const {
    return xlmr() ? 4 + k : roberta() ? 31 + 2 * k + spaced : 5 + k;
  }
  int32_t cls() const { return roberta() ? 0 : 2; }
  int32_t sep() const { return roberta() ? 2 : 3; }
  static constexpr int32_t kCls = 2, kSep = 3;  // BERT's

  // Writes config.json, the tokenizer (vocab.txt, or tokenizer.json for
  // RoBERTa) and model.safetensors with the family's names and prefix.
  void write(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    const std::string cls_name = xlmr() ? "XLMRoberta" : roberta() ? "Roberta" : distil() ? "DistilBert" : "Bert";
    const std::string arch = cls_name + (s_.classifier ? "ForSequenceClassification" : "Model");
    auto n = [](int v) { return std::to_string(v); };
    std::string cfg = "{\"model_type\":\"" + s_.family + "\",\"architectures\":[\"" + arch +
                      "\"],\"vocab_size\":" + n(vocab()) + ",\"max_position_embeddings\":" + n(s_.positions);
    if (distil())
      cfg += ",\"dim\":" + n(s_.hidden) + ",\"n_layers\":" + n(s_.layers) + ",\"n_heads\":" + n(s_.heads) +
             ",\"hidden_dim\":" + n(s_.intermediate) + ",\"activation\":\"gelu\"";
    else
      cfg += ",\"hidden_size\":" + n(s_.hidden) + ",\"num_hidden_layers\":" + n(s_.layers) +
             ",\"num_attention_heads\":" + n(s_.heads) + ",\"intermediate_size\":" + n(s_.intermediate) +
             ",\"type_vocab_size\":" + n(s_.type_vocab) + ",\"hidden_act\":\"gelu\",\"layer_norm_eps\":1e-12" +
             (roberta() ? ",\"pad_token_id\":1" : "");
    cfg += (s_.classifier ? ",\"id2label\":{\"0\":\"LABEL_0\"}" : "") + s_.extra_config + "}";
    write_text(dir / "config.json", cfg);
    if (xlmr()) {
      write_text(dir / "tokenizer.json", unigram_tokenizer_json());
    } else if (roberta()) {
      write_text(dir / "tokenizer.json", bpe_tokenizer_json());
    } else {
      std::string vocab_txt = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
      for (int k = 0; k < s_.vocab_words; ++k) vocab_txt += word(k) + "\n";
      write_text(dir / "vocab.txt", vocab_txt);
    }
    const std::string prefix = roberta() ? "roberta." : distil() ? "distilbert." : "bert.";
    Tensors file;
    for (const auto& [name, t] : w_) {
      if (name.rfind("classifier.", 0) == 0) {
        file[head_name(name)] = t;
      } else if (name.rfind("pooler.", 0) == 0) {
        if (roberta() || distil()) file[head_name(name)] = t;  // the head's hidden layer
        else file[prefix + name] = t;
      } else {
        file[prefix + (distil() ? distil_name(name) : name)] = t;
      }
    }
    write_safetensors(dir / "model.safetensors", file);
  }

  // Hidden states [tokens][hidden] of one unpadded text.
  std::vector<std::vector<double>> hidden(const std::vector<int32_t>& ids, const std::vector<int32_t>& types) const {
    const size_t S = ids.size(), H = size_t(s_.hidden), I = size_t(s_.intermediate);
    const size_t heads = size_t(s_.heads), hd = H / heads;
    std::vector<std::vector<double>> x(S, std::vector<double>(H));
    const size_t offset = roberta() ? 2 : 0;  // padding_idx 1, plus one
    for (size_t t = 0; t < S; ++t)
      for (size_t d = 0; d < H; ++d)
        x[t][d] = at("embeddings.word_embeddings.weight", size_t(ids[t]) * H + d) +
                  at("embeddings.position_embeddings.weight", (t + offset) * H + d) +
                  (distil() ? 0.0 : at("embeddings.token_type_embeddings.weight", size_t(types[t]) * H + d));
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

  // The cross-encoder's logit: classifier(act(hidden layer(x[0]))), tanh
  // for BERT and RoBERTa, relu for DistilBERT.
  double logit(const std::vector<int32_t>& ids, const std::vector<int32_t>& types) const {
    auto x = hidden(ids, types);
    auto pooled = dense({x[0]}, "pooler.dense", size_t(s_.hidden))[0];
    for (double& e : pooled) e = distil() ? std::max(e, 0.0) : std::tanh(e);
    return dense({pooled}, "classifier", 1)[0][0];
  }

  // [CLS] words [SEP] (RoBERTa: <s> words </s>) for words given by index.
  std::vector<int32_t> ids_of(const std::vector<int>& words) const {
    std::vector<int32_t> ids{cls()};
    for (size_t i = 0; i < words.size(); ++i) ids.push_back(id(words[i], i > 0));
    ids.push_back(sep());
    return ids;
  }
  // A cross-encoder's pair: BERT [CLS] q [SEP] d [SEP] with types 0 then 1;
  // RoBERTa <s> q </s></s> d </s>, all type 0; DistilBERT has no types.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> pair_ids(const std::vector<int>& q,
                                                                 const std::vector<int>& doc) const {
    std::vector<int32_t> ids = ids_of(q), types(ids.size(), 0);
    if (roberta()) ids.push_back(sep());
    for (size_t i = 0; i < doc.size(); ++i) ids.push_back(id(doc[i], i > 0));
    ids.push_back(sep());
    types.resize(ids.size(), s_.family == "bert" ? 1 : 0);
    return {ids, types};
  }
  static std::string text_of(const std::vector<int>& words) {
    std::string s;
    for (int k : words) s += (s.empty() ? "" : " ") + word(k);
    return s;
  }

 private:
  double at(const std::string& name, size_t i) const { return w_.at(name).second.at(i); }

  // Where BERT's names go in the other families' files.
  std::string head_name(const std::string& name) const {
    const bool weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    const std::string tail = weight ? ".weight" : ".bias";
    const bool hidden = name.rfind("pooler.", 0) == 0;
    if (roberta()) return std::string(hidden ? "classifier.dense" : "classifier.out_proj") + tail;
    if (distil()) return std::string(hidden ? "pre_classifier" : "classifier") + tail;
    return name;
  }
  static std::string distil_name(std::string name) {
    const std::pair<const char*, const char*> map[] = {
        {"encoder.layer.", "transformer.layer."},
        {"attention.self.query", "attention.q_lin"},
        {"attention.self.key", "attention.k_lin"},
        {"attention.self.value", "attention.v_lin"},
        {"attention.output.dense", "attention.out_lin"},
        {"attention.output.LayerNorm", "sa_layer_norm"},
        {"intermediate.dense", "ffn.lin1"},
        {"output.dense", "ffn.lin2"},
        {"output.LayerNorm", "output_layer_norm"}};
    for (const auto& [from, to] : map)
      if (auto at = name.find(from); at != std::string::npos) name.replace(at, std::strlen(from), to);
    return name;
  }
  // A byte-level BPE tokenizer.json whose merges make each word one token,
  // "Ġ" + word after a space; RobertaProcessing adds <s> and </s>.
  std::string bpe_tokenizer_json() const {
    const std::string G = "\xc4\xa0";  // "Ġ", the byte-level form of a space
    std::string vocab = "\"<s>\":0,\"<pad>\":1,\"</s>\":2,\"<unk>\":3";
    for (int c = 0; c < 26; ++c) vocab += ",\"" + std::string(1, char('a' + c)) + "\":" + std::to_string(4 + c);
    vocab += ",\"" + G + "\":30";
    std::string merges;
    for (int k = 0; k < s_.vocab_words; ++k) {
      const std::string w = word(k);
      vocab += ",\"" + w + "\":" + std::to_string(id(k)) + ",\"" + G + w + "\":" + std::to_string(id(k, true));
      merges += std::string(merges.empty() ? "" : ",") + "\"" + w.substr(0, 1) + " " + w.substr(1) + "\"";
    }
    for (int k = 0; k < s_.vocab_words; ++k) merges += ",\"" + G + " " + word(k) + "\"";
    std::string added;
    const char* specials[] = {"<s>", "<pad>", "</s>", "<unk>"};
    for (int i = 0; i < 4; ++i)
      added += std::string(i ? "," : "") + "{\"id\":" + std::to_string(i) + ",\"content\":\"" + specials[i] +
               "\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}";
    return "{\"version\":\"1.0\",\"added_tokens\":[" + added +
           "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
           "\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":{\"type\":\"RobertaProcessing\","
           "\"sep\":[\"</s>\",2],\"cls\":[\"<s>\",0],\"trim_offsets\":true,\"add_prefix_space\":false},"
           "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"dropout\":null,"
           "\"unk_token\":null,\"continuing_subword_prefix\":\"\",\"end_of_word_suffix\":\"\","
           "\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":{" + vocab + "},\"merges\":[" + merges + "]}}";
  }
  // XLM-R's layout: a Unigram model whose best cut of "▁" + word is that
  // one piece, a normalizer, Metaspace and the <s> A </s></s> B </s> template.
  std::string unigram_tokenizer_json() const {
    std::string vocab = R"(["<s>",0.0],["<pad>",0.0],["</s>",0.0],["<unk>",0.0])";
    for (int k = 0; k < s_.vocab_words; ++k) vocab += ",[\"\xe2\x96\x81" + word(k) + "\",-2.0]";
    for (int c = 0; c < 26; ++c) vocab += ",[\"" + std::string(1, char('a' + c)) + "\",-8.0]";
    std::string added;
    const char* specials[] = {"<s>", "<pad>", "</s>", "<unk>"};
    for (int i = 0; i < 4; ++i)
      added += std::string(i ? "," : "") + "{\"id\":" + std::to_string(i) + ",\"content\":\"" + specials[i] +
               "\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}";
    const std::string s = R"({"SpecialToken":{"id":"<s>","type_id":0}})",
                      e = R"({"SpecialToken":{"id":"</s>","type_id":0}})";
    const std::string a = R"({"Sequence":{"id":"A","type_id":0}})", b = R"({"Sequence":{"id":"B","type_id":0}})";
    return "{\"version\":\"1.0\",\"added_tokens\":[" + added +
           R"(],"normalizer":{"type":"Sequence","normalizers":[{"type":"NFKC"},)"
           R"({"type":"Replace","pattern":{"Regex":" {2,}"},"content":" "}]},)"
           R"("pre_tokenizer":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":"always","split":true},)"
           R"("post_processor":{"type":"TemplateProcessing","single":[)" + s + "," + a + "," + e +
           "],\"pair\":[" + s + "," + a + "," + e + "," + e + "," + b + "," + e +
           R"(],"special_tokens":{"<s>":{"id":"<s>","ids":[0],"tokens":["<s>"]},)"
           R"("</s>":{"id":"</s>","ids":[2],"tokens":["</s>"]}}},)"
           R"("decoder":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":"always","split":true},)"
           R"("model":{"type":"Unigram","unk_id":3,"vocab":[)" + vocab + "],\"byte_fallback\":false}}";
  }
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
