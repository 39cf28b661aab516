#include "models/hf_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rlx/error.h"

namespace rlx {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  RLX_CHECK(in, "cannot open '" << p.string() << "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("'" << p.string() << "' is not valid JSON: " << e.what());
  }
}

Activation parse_activation(const std::string& s, const fs::path& file) {
  if (s == "gelu") return Activation::Gelu;  // erf form
  if (s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast") return Activation::GeluTanh;
  if (s == "relu") return Activation::Relu;
  if (s == "silu" || s == "swish") return Activation::Silu;
  if (s == "tanh") return Activation::Tanh;
  RLX_FAIL("'" << file.string() << "': hidden_act '" << s << "' is not supported");
}

bool is_bert_architecture(const std::string& a) {
  return a.rfind("Bert", 0) == 0;  // BertModel, BertForMaskedLM, BertForSequenceClassification...
}

}  // namespace

BertConfig load_bert_config(const std::string& dir_or_file) {
  fs::path file = fs::is_directory(dir_or_file) ? fs::path(dir_or_file) / "config.json"
                                                : fs::path(dir_or_file);
  nlohmann::json j = read_json(file);
  RLX_CHECK(j.is_object(), "'" << file.string() << "' is not a JSON object");
  BertConfig c;
  try {
    c.model_type = j.value("model_type", std::string());
    if (j.contains("architectures") && j["architectures"].is_array())
      c.architectures = j["architectures"].get<std::vector<std::string>>();
    bool arch_ok = c.architectures.empty() || is_bert_architecture(c.architectures[0]);
    std::string what = !c.architectures.empty() ? c.architectures[0] : c.model_type;
    RLX_CHECK(c.model_type == "bert" && arch_ok,
              "'" << file.string() << "': unsupported architecture '" << (what.empty() ? "?" : what)
                  << "' (model_type '" << c.model_type
                  << "'); rlx loads BERT encoders (model_type 'bert')");
    std::string pos = j.value("position_embedding_type", std::string("absolute"));
    RLX_CHECK(pos == "absolute", "'" << file.string() << "': position_embedding_type '" << pos
                                     << "' is not supported (only 'absolute')");
    c.vocab_size = j.value("vocab_size", c.vocab_size);
    c.hidden_size = j.value("hidden_size", c.hidden_size);
    c.num_hidden_layers = j.value("num_hidden_layers", c.num_hidden_layers);
    c.num_attention_heads = j.value("num_attention_heads", c.num_attention_heads);
    c.intermediate_size = j.value("intermediate_size", c.intermediate_size);
    c.hidden_act = parse_activation(j.value("hidden_act", std::string("gelu")), file);
    c.layer_norm_eps = j.value("layer_norm_eps", c.layer_norm_eps);
    c.max_position_embeddings = j.value("max_position_embeddings", c.max_position_embeddings);
    c.type_vocab_size = j.value("type_vocab_size", c.type_vocab_size);
    if (j.contains("pad_token_id") && j["pad_token_id"].is_number_integer())
      c.pad_token_id = j["pad_token_id"].get<int>();
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("'" << file.string() << "': bad field: " << e.what());
  }
  RLX_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.num_hidden_layers > 0 &&
                c.num_attention_heads > 0 && c.intermediate_size > 0 &&
                c.max_position_embeddings > 0 && c.type_vocab_size > 0,
            "'" << file.string() << "': sizes must be positive");
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
    nlohmann::json m = read_json(modules);
    RLX_CHECK(m.is_array(), "'" << modules.string() << "' must be a JSON array of modules");
    for (const auto& mod : m) {
      std::string type = mod.value("type", std::string());
      std::string path = mod.value("path", std::string());
      if (type.find("Normalize") != std::string::npos) {
        s.normalize = true;
      } else if (type.find("Pooling") != std::string::npos) {
        fs::path pc = fs::path(dir) / path / "config.json";
        if (!fs::exists(pc)) continue;  // sentence-transformers defaults to mean pooling
        nlohmann::json p = read_json(pc);
        bool cls = p.value("pooling_mode_cls_token", false);
        bool mean = p.value("pooling_mode_mean_tokens", false);
        for (const char* other : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                                  "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"})
          RLX_CHECK(!p.value(other, false),
                    "'" << pc.string() << "': " << other << " is not supported (mean or cls are)");
        RLX_CHECK(cls != mean, "'" << pc.string() << "': exactly one of pooling_mode_mean_tokens and "
                                                     "pooling_mode_cls_token must be set");
        s.pooling = cls ? Pooling::Cls : Pooling::Mean;
      }
    }
  }
  fs::path sb = fs::path(dir) / "sentence_bert_config.json";
  if (fs::exists(sb)) {
    nlohmann::json j = read_json(sb);
    if (j.contains("max_seq_length") && j["max_seq_length"].is_number_integer())
      s.max_seq_length = j["max_seq_length"].get<int>();
  }
  return s;
}

}  // namespace rlx
