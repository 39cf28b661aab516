#include "models/hf_config.h"

#include <filesystem>

#include "models/json_read.h"
#include "rlx/error.h"

namespace rlx {
namespace fs = std::filesystem;
namespace {

Activation parse_activation(const std::string& s, const std::string& where) {
  if (s == "gelu") return Activation::Gelu;  // erf form
  if (s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast") return Activation::GeluTanh;
  if (s == "relu") return Activation::Relu;
  if (s == "silu" || s == "swish") return Activation::Silu;
  if (s == "tanh") return Activation::Tanh;
  RLX_FAIL(where << "hidden_act '" << s << "' is not supported");
}

bool is_bert_architecture(const std::string& a) {
  return a.rfind("Bert", 0) == 0;  // BertModel, BertForMaskedLM, BertForSequenceClassification...
}

}  // namespace

fs::path confined_path(const fs::path& dir, const std::string& rel, const std::string& where) {
  fs::path r(rel);
  RLX_CHECK(!r.has_root_path(), where << "path '" << rel << "' must be relative to the model folder");
  for (const auto& part : r)
    RLX_CHECK(part != "..", where << "path '" << rel << "' climbs out of the model folder");
  fs::path full = dir / r;
  // A folder inside may still be a link that leads out; files are not
  // resolved, since Hugging Face's cache links each file to a blob elsewhere.
  std::error_code ec;
  if (fs::is_directory(full, ec)) {
    fs::path base = fs::canonical(dir, ec);
    fs::path real = ec ? fs::path() : fs::canonical(full, ec);
    RLX_CHECK(!ec, where << "cannot resolve path '" << rel << "'");
    auto rel_to_base = real.lexically_relative(base);
    RLX_CHECK(!rel_to_base.empty() && *rel_to_base.begin() != "..",
              where << "path '" << rel << "' leads out of the model folder (to '" << real.string() << "')");
  }
  return full;
}

BertConfig load_bert_config(const std::string& dir_or_file) {
  fs::path file = fs::is_directory(dir_or_file) ? fs::path(dir_or_file) / "config.json"
                                                : fs::path(dir_or_file);
  nlohmann::json doc = read_json_file(file);
  JsonField j(doc, file.string());
  j.object();
  BertConfig c;
  c.model_type = j.string_or("model_type", "");
  if (j.has("architectures")) {
    JsonField a = j.at("architectures");
    for (size_t i = 0; i < a.size(); ++i) c.architectures.push_back(a.at(i).string());
  }
  bool arch_ok = c.architectures.empty() || is_bert_architecture(c.architectures[0]);
  std::string what = !c.architectures.empty() ? c.architectures[0] : c.model_type;
  RLX_CHECK(c.model_type == "bert" && arch_ok,
            "'" << file.string() << "': unsupported architecture '" << (what.empty() ? "?" : what)
                << "' (model_type '" << c.model_type
                << "'); rlx loads BERT encoders (model_type 'bert')");
  std::string pos = j.string_or("position_embedding_type", "absolute");
  RLX_CHECK(pos == "absolute", "'" << file.string() << "': position_embedding_type '" << pos
                                   << "' is not supported (only 'absolute')");
  const BertLimits L;
  c.vocab_size = int(j.integer_or("vocab_size", c.vocab_size, 1, L.vocab));
  c.hidden_size = int(j.integer_or("hidden_size", c.hidden_size, 1, L.hidden));
  c.num_hidden_layers = int(j.integer_or("num_hidden_layers", c.num_hidden_layers, 1, L.layers));
  c.num_attention_heads = int(j.integer_or("num_attention_heads", c.num_attention_heads, 1, L.heads));
  c.intermediate_size = int(j.integer_or("intermediate_size", c.intermediate_size, 1, L.intermediate));
  std::string act = j.string_or("hidden_act", "gelu");
  c.hidden_act = parse_activation(act, j.where());
  c.layer_norm_eps = float(j.number_or("layer_norm_eps", c.layer_norm_eps, 0.0, 1.0));
  c.max_position_embeddings =
      int(j.integer_or("max_position_embeddings", c.max_position_embeddings, 1, L.positions));
  c.type_vocab_size = int(j.integer_or("type_vocab_size", c.type_vocab_size, 1, L.type_vocab));
  c.pad_token_id = int(j.integer_or("pad_token_id", c.pad_token_id, 0, c.vocab_size - 1));
  RLX_CHECK(c.hidden_size % c.num_attention_heads == 0,
            "'" << file.string() << "': hidden_size " << c.hidden_size
                << " is not a multiple of num_attention_heads " << c.num_attention_heads);
  return c;
}

SentenceConfig load_sentence_config(const std::string& dir) {
  SentenceConfig s;
  fs::path modules = fs::path(dir) / "modules.json";
  if (fs::exists(modules)) {
    s.present = true;
    nlohmann::json doc = read_json_file(modules);
    JsonField m(doc, modules.string());
    for (size_t i = 0; i < m.size(); ++i) {
      JsonField mod = m.at(i).object();
      std::string type = mod.at("type").string();
      std::string path = mod.string_or("path", "");
      if (type.find("Normalize") != std::string::npos) {
        s.normalize = true;
      } else if (type.find("Pooling") != std::string::npos) {
        fs::path pc = confined_path(dir, path, mod.where()) / "config.json";
        if (!fs::exists(pc)) continue;  // sentence-transformers defaults to mean pooling
        nlohmann::json pdoc = read_json_file(pc);
        JsonField p(pdoc, pc.string());
        p.object();
        bool cls = p.boolean_or("pooling_mode_cls_token", false);
        bool mean = p.boolean_or("pooling_mode_mean_tokens", false);
        for (const char* other : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                                  "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"})
          RLX_CHECK(!p.boolean_or(other, false),
                    "'" << pc.string() << "': " << other << " is not supported (mean or cls are)");
        RLX_CHECK(cls != mean, "'" << pc.string() << "': exactly one of pooling_mode_mean_tokens and "
                                                     "pooling_mode_cls_token must be set");
        s.pooling = cls ? Pooling::Cls : Pooling::Mean;
      }
    }
  }
  fs::path sb = fs::path(dir) / "sentence_bert_config.json";
  if (fs::exists(sb)) {
    nlohmann::json doc = read_json_file(sb);
    JsonField j(doc, sb.string());
    j.object();
    s.max_seq_length = int(j.integer_or("max_seq_length", 0, 1, BertLimits{}.positions));
  }
  return s;
}

}  // namespace rlx
