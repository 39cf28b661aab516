#include "models/hf_config.h"

#include <filesystem>

#include "models/json_read.h"
#include "models/llama.h"
#include "models/modernbert.h"
#include "models/nomic_bert.h"
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

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The heads whose encoder output is the embedding (the head is not run) and
// the cross-encoder head; any other head would be silently dropped.
bool is_encoder_head(const std::string& a) {
  return ends_with(a, "Model") || ends_with(a, "ForMaskedLM") || ends_with(a, "ForPreTraining");
}

}  // namespace

BertConfig::ScoreActivation parse_score_activation(const std::string& s, const std::string& where) {
  // Written as a class path, e.g. "torch.nn.modules.activation.Sigmoid".
  std::string last = s.substr(s.rfind('.') == std::string::npos ? 0 : s.rfind('.') + 1);
  if (last == "Sigmoid") return BertConfig::ScoreActivation::Sigmoid;
  if (last == "Identity") return BertConfig::ScoreActivation::Identity;
  RLX_FAIL(where << "activation '" << s << "' is not supported (Sigmoid or Identity)");
}

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

namespace {

struct FamilyInfo {
  EncoderFamily family;
  const char* model_type;
  const char* arch_prefix;  // the architectures of the family start with it
};
constexpr FamilyInfo kFamilies[] = {{EncoderFamily::Bert, "bert", "Bert"},
                                    {EncoderFamily::Roberta, "roberta", "Roberta"},
                                    // XLM-R is RoBERTa's graph and names with a Unigram tokenizer.
                                    {EncoderFamily::Roberta, "xlm-roberta", "XLMRoberta"},
                                    {EncoderFamily::DistilBert, "distilbert", "DistilBert"},
                                    {EncoderFamily::NomicBert, "nomic_bert", "NomicBert"},
                                    {EncoderFamily::ModernBert, "modernbert", "ModernBert"}};

// The classification head of each family, read into c.
void read_classifier(const JsonField& j, BertConfig& c, int64_t max_labels) {
  // id2label is what transformers writes; num_labels is accepted too.
  if (j.has("id2label")) {
    c.num_labels = 0;
    j.at("id2label").object().for_each_member([&](const std::string&, const JsonField&) { ++c.num_labels; });
    RLX_CHECK(c.num_labels >= 1, j.where() << "id2label is empty");
  }
  c.num_labels = int(j.integer_or("num_labels", c.num_labels, 1, max_labels));
  std::string ptype = j.string_or("problem_type", "");
  RLX_CHECK(ptype.empty() || ptype == "regression" || ptype == "single_label_classification",
            j.where() << "problem_type '" << ptype << "' is not supported for a cross-encoder");
  c.score_activation =
      c.num_labels == 1 ? BertConfig::ScoreActivation::Sigmoid : BertConfig::ScoreActivation::Identity;
  if (j.has("sentence_transformers")) {
    JsonField st = j.at("sentence_transformers").object();
    if (st.has("activation_fn"))
      c.score_activation = parse_score_activation(st.at("activation_fn").string(), st.where());
  } else if (j.has("sbert_ce_default_activation_function")) {
    c.score_activation = parse_score_activation(j.at("sbert_ce_default_activation_function").string(), j.where());
  }
}

}  // namespace

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
  const std::string arch = c.architectures.empty() ? "" : c.architectures[0];
  const FamilyInfo* fam = nullptr;
  for (const FamilyInfo& f : kFamilies)
    if (c.model_type == f.model_type) fam = &f;
  bool arch_ok = fam && (arch.empty() || (arch.rfind(fam->arch_prefix, 0) == 0 &&
                                          (is_encoder_head(arch) || ends_with(arch, "ForSequenceClassification"))));
  std::string what = !arch.empty() ? arch : c.model_type;
  // A model whose code ships beside it (auto_map: transformers runs it only
  // with trust_remote_code) is its own architecture, whatever its name.
  const std::string remote = j.has("auto_map") ? " (its modeling code comes with the model: auto_map, "
                                                 "trust_remote_code in transformers)"
                                               : "";
  RLX_CHECK(arch_ok,
            "'" << file.string() << "': unsupported architecture '" << (what.empty() ? "?" : what)
                << "' (model_type '" << c.model_type << "')" << remote
                << "; rlx loads encoders of model_type 'bert', 'roberta', 'xlm-roberta', 'distilbert', 'nomic_bert' and 'modernbert' (*Model, "
                   "*ForMaskedLM, *ForPreTraining) and their cross-encoders (*ForSequenceClassification); as embedders "
                   "also the decoders of model_type " << llama_hf_model_types());
  c.family = fam->family;
  c.classifier = ends_with(arch, "ForSequenceClassification");
  const BertLimits L;
  RLX_CHECK(!(c.classifier && c.family == EncoderFamily::NomicBert),
            "'" << file.string() << "': architecture '" << arch << "' is not supported (NomicBertModel is)");
  if (c.family == EncoderFamily::NomicBert) {
    read_nomic_bert_config(j, c);
  } else if (c.family == EncoderFamily::ModernBert) {
    read_modernbert_config(j, c);
  } else if (c.family == EncoderFamily::DistilBert) {
    // DistilBERT's own key names; no token types, post-norm layers as BERT.
    RLX_CHECK(!j.boolean_or("sinusoidal_pos_embds", false),
              j.where() << "sinusoidal_pos_embds is not supported (learned positions are)");
    c.vocab_size = int(j.integer_or("vocab_size", c.vocab_size, 1, L.vocab));
    c.hidden_size = int(j.integer_or("dim", c.hidden_size, 1, L.hidden));
    c.num_hidden_layers = int(j.integer_or("n_layers", 6, 1, L.layers));
    c.num_attention_heads = int(j.integer_or("n_heads", c.num_attention_heads, 1, L.heads));
    c.intermediate_size = int(j.integer_or("hidden_dim", c.intermediate_size, 1, L.intermediate));
    c.hidden_act = parse_activation(j.string_or("activation", "gelu"), j.where());
    c.layer_norm_eps = 1e-12f;
    c.type_vocab_size = 0;
  } else {
    std::string pos = j.string_or("position_embedding_type", "absolute");
    RLX_CHECK(pos == "absolute", "'" << file.string() << "': position_embedding_type '" << pos
                                     << "' is not supported (only 'absolute')");
    c.vocab_size = int(j.integer_or("vocab_size", c.vocab_size, 1, L.vocab));
    c.hidden_size = int(j.integer_or("hidden_size", c.hidden_size, 1, L.hidden));
    c.num_hidden_layers = int(j.integer_or("num_hidden_layers", c.num_hidden_layers, 1, L.layers));
    c.num_attention_heads = int(j.integer_or("num_attention_heads", c.num_attention_heads, 1, L.heads));
    c.intermediate_size = int(j.integer_or("intermediate_size", c.intermediate_size, 1, L.intermediate));
    std::string act = j.string_or("hidden_act", "gelu");
    c.hidden_act = parse_activation(act, j.where());
    c.layer_norm_eps = float(j.number_or("layer_norm_eps", c.layer_norm_eps, 0.0, 1.0));
    c.type_vocab_size = int(j.integer_or("type_vocab_size", c.type_vocab_size, 1, L.type_vocab));
  }
  if (c.family != EncoderFamily::NomicBert && c.family != EncoderFamily::ModernBert) {
    c.max_position_embeddings =
        int(j.integer_or("max_position_embeddings", c.max_position_embeddings, 1, L.positions));
    c.pad_token_id =
        int(j.integer_or("pad_token_id", c.family == EncoderFamily::Roberta ? 1 : 0, 0, c.vocab_size - 1));
  }
  // RoBERTa numbers positions from padding_idx + 1 (padding_idx = pad_token_id).
  if (c.family == EncoderFamily::Roberta) {
    c.position_offset = c.pad_token_id + 1;
    RLX_CHECK(c.max_position_embeddings > c.position_offset,
              j.where() << "max_position_embeddings " << c.max_position_embeddings
                        << " leaves no position after the offset " << c.position_offset);
  }
  if (c.classifier) read_classifier(j, c, L.hidden);
  RLX_CHECK(c.hidden_size % c.num_attention_heads == 0,
            "'" << file.string() << "': hidden_size " << c.hidden_size
                << " is not a multiple of num_attention_heads " << c.num_attention_heads);
  return c;
}

Pooling parse_pooling(const std::string& n, const std::string& what) {
  if (n == "mean" || n == "mean_tokens") return Pooling::Mean;
  if (n == "cls" || n == "cls_token") return Pooling::Cls;
  if (n == "max" || n == "max_tokens") return Pooling::Max;
  if (n == "mean_sqrt_len" || n == "mean_sqrt_len_tokens") return Pooling::MeanSqrtLen;
  if (n == "weightedmean" || n == "weightedmean_tokens") return Pooling::WeightedMean;
  if (n == "lasttoken" || n == "last_token") return Pooling::LastToken;
  RLX_FAIL(what << " '" << n << "' is not a pooling mode (mean, cls, max, mean_sqrt_len, weightedmean, "
                   "lasttoken)");
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Max: return "max";
    case Pooling::MeanSqrtLen: return "mean_sqrt_len";
    case Pooling::WeightedMean: return "weightedmean";
    case Pooling::LastToken: return "lasttoken";
  }
  return "?";
}

SentenceConfig load_sentence_config(const std::string& dir) {
  SentenceConfig s;
  s.transformer_dir = dir;
  fs::path modules = fs::path(dir) / "modules.json";
  if (fs::exists(modules)) {
    s.present = true;
    nlohmann::json doc = read_json_file(modules);
    JsonField m(doc, modules.string());
    // The order sentence-transformers runs them in; anything else would be
    // silently skipped, so it is refused.
    int stage = 0;  // 0 Transformer, 1 Pooling, 2 Dense, 3 Normalize, 4 LogitScore
    for (size_t i = 0; i < m.size(); ++i) {
      JsonField mod = m.at(i).object();
      std::string type = mod.at("type").string();
      std::string path = mod.string_or("path", "");
      const std::string name = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
      const int want = name == "Transformer" ? 0 : name == "Pooling" ? 1 : name == "Dense" ? 2
                       : name == "Normalize" ? 3 : name == "LogitScore" ? 4 : -1;
      RLX_CHECK(want >= 0, mod.where() << "module type '" << type
                                       << "' is not supported (Transformer, Pooling, Dense and Normalize are, "
                                          "and LogitScore after a Transformer alone)");
      RLX_CHECK(want > stage || (want == 2 && stage == 2) || (i == 0 && want == 0),
                mod.where() << "module '" << type << "' comes after a module it must precede "
                                                     "(the order is Transformer, Pooling, Dense, Normalize)");
      // LogitScore reads the causal LM's logits: nothing may come between.
      RLX_CHECK(want != 4 || (i == 1 && stage == 0),
                mod.where() << "module '" << type << "' must directly follow the Transformer module");
      stage = want;
      if (name == "Transformer") {
        // Older models keep it in a folder of its own ("0_BERT", "0_Transformer").
        if (!path.empty()) s.transformer_dir = confined_path(dir, path, mod.where()).string();
      } else if (name == "Normalize") {
        s.normalize = true;
      } else if (name == "LogitScore") {
        s.logit_score_dir = confined_path(dir, path, mod.where()).string();
      } else if (name == "Dense") {
        s.dense_dirs.push_back(confined_path(dir, path, mod.where()).string());
      } else if (name == "Pooling") {
        fs::path pc = confined_path(dir, path, mod.where()) / "config.json";
        if (!fs::exists(pc)) continue;  // sentence-transformers defaults to mean pooling
        nlohmann::json pdoc = read_json_file(pc);
        JsonField p(pdoc, pc.string());
        p.object();
        const std::pair<const char*, Pooling> modes[] = {
            {"pooling_mode_cls_token", Pooling::Cls},
            {"pooling_mode_mean_tokens", Pooling::Mean},
            {"pooling_mode_max_tokens", Pooling::Max},
            {"pooling_mode_mean_sqrt_len_tokens", Pooling::MeanSqrtLen},
            {"pooling_mode_weightedmean_tokens", Pooling::WeightedMean},
            {"pooling_mode_lasttoken", Pooling::LastToken}};
        int set = 0;
        for (const auto& [key, mode] : modes)
          if (p.boolean_or(key, false)) {
            s.pooling = mode;
            ++set;
          }
        // Newer sentence-transformers write the mode by name ("pooling_mode":
        // "mean", or a list of names) instead of one flag per mode.
        if (set == 0 && pdoc.contains("pooling_mode")) {
          const nlohmann::json& pm = pdoc["pooling_mode"];
          std::vector<std::string> names;
          if (pm.is_string()) names.push_back(pm.get<std::string>());
          if (pm.is_array())
            for (const auto& n : pm) {
              RLX_CHECK(n.is_string(), "'" << pc.string() << "': pooling_mode must hold names");
              names.push_back(n.get<std::string>());
            }
          RLX_CHECK(!names.empty(), "'" << pc.string() << "': pooling_mode must be a name or a list of names");
          const std::pair<const char*, Pooling> by_name[] = {
              {"cls", Pooling::Cls}, {"mean", Pooling::Mean}, {"max", Pooling::Max},
              {"mean_sqrt_len_tokens", Pooling::MeanSqrtLen}, {"weightedmean", Pooling::WeightedMean},
              {"lasttoken", Pooling::LastToken}};
          for (const std::string& n : names) {
            bool known = false;
            for (const auto& [name, mode] : by_name)
              if (n == name) s.pooling = mode, known = true;
            RLX_CHECK(known, "'" << pc.string() << "': pooling_mode '" << n
                                  << "' is not one of cls, mean, max, mean_sqrt_len_tokens, weightedmean, lasttoken");
            ++set;
          }
        }
        // Several modes at once concatenate their vectors in sentence-transformers.
        RLX_CHECK(set == 1, "'" << pc.string() << "': exactly one pooling mode must be set (pooling_mode_* or "
                                   "pooling_mode), found " << set << " (concatenated pooling modes are not supported)");
        s.include_prompt = p.boolean_or("include_prompt", true);
      }
    }
  }
  fs::path cst = fs::path(dir) / "config_sentence_transformers.json";
  if (fs::exists(cst)) {
    nlohmann::json doc = read_json_file(cst);
    JsonField j(doc, cst.string());
    j.object();
    if (j.has("prompts"))
      j.at("prompts").object().for_each_member([&](const std::string& name, const JsonField& v) {
        s.prompts.emplace_back(name, v.string());
      });
    // sentence-transformers up to 5 stripped each text before tokenizing; 6
    // does not. A model keeps the behaviour of the version that saved it.
    if (j.has("__version__") && j.at("__version__").json().is_object()) {
      const std::string v = j.at("__version__").string_or("sentence_transformers", "");
      const size_t digits = v.find_first_not_of("0123456789");
      const std::string major = v.substr(0, digits);
      s.strip_texts = major.empty() || major.size() > 3 || std::stoi(major) < 6;
    }
    s.default_prompt_name = j.string_or("default_prompt_name", "");
    s.activation_fn = j.string_or("activation_fn", "");
    if (!s.default_prompt_name.empty()) {
      bool known = false;
      for (const auto& pr : s.prompts) known |= pr.first == s.default_prompt_name;
      RLX_CHECK(known, j.where() << "default_prompt_name '" << s.default_prompt_name
                                 << "' is not one of its prompts");
    }
  }
  fs::path sb = fs::path(dir) / "sentence_bert_config.json";
  if (!fs::exists(sb)) sb = fs::path(s.transformer_dir) / "sentence_bert_config.json";
  if (fs::exists(sb)) {
    nlohmann::json doc = read_json_file(sb);
    JsonField j(doc, sb.string());
    j.object();
    s.max_seq_length = int(j.integer_or("max_seq_length", 0, 1, BertLimits{}.positions));
    s.transformer_task = j.string_or("transformer_task", "");
    if (j.has("modality_config")) {
      JsonField mc = j.at("modality_config").object();
      s.modality_config_given = true;
      if (mc.has("message")) {
        s.message_modality = true;
        s.message_format = mc.at("message").object().string_or("format", "auto");
      }
    }
  }
  // Without a max_seq_length, sentence-transformers truncates at the
  // tokenizer's model_max_length (when below the positions), as newer
  // versions save it: only there. transformers writes ~1e30 for "no limit".
  const fs::path tc = fs::path(s.transformer_dir.empty() ? dir : s.transformer_dir) / "tokenizer_config.json";
  if (fs::exists(tc)) {
    nlohmann::json doc = read_json_file(tc);
    JsonField j(doc, tc.string());
    j.object();
    const double m = j.number_or("model_max_length", 0, 0, 1e300);
    if (m >= 1 && m <= BertLimits{}.positions) s.tokenizer_max_length = int(m);
  }
  return s;
}

}  // namespace rlx
