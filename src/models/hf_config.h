// Hugging Face model-directory configs: config.json for BERT-family encoders
// and the sentence-transformers files (modules.json, pooling, normalize).
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "rlx/enums.h"

namespace rlx {

// The largest sizes a config may give: far above any BERT-family model, low
// enough that a hostile config fails at once instead of building for hours.
struct BertLimits {
  int vocab = 1 << 22, hidden = 1 << 16, layers = 1024, heads = 1024, intermediate = 1 << 18,
      positions = 1 << 16, type_vocab = 1 << 16;
};

// Encoders with BERT's post-norm layers, told apart by their names,
// positions and token types (Roberta serves model_type xlm-roberta too).
enum class EncoderFamily { Bert, Roberta, DistilBert, NomicBert, ModernBert };

// NomicBERT's differences from BERT (nomic_bert.h): rotary positions in
// place of a position table, a fused Wqkv, a gated MLP, optional biases.
struct NomicOptions {
  float rotary_base = 10000.f;
  bool rotary_interleaved = false;
  bool qkv_bias = true, fc1_bias = true, fc2_bias = true;
  Activation gate_act = Activation::Silu;  // swiglu: fc2(fc11(x) * act(fc12(x)))
};

// ModernBERT's differences (modernbert.h): pre-norm layers, rotary positions
// with one theta for global and one for local layers, local layers attending
// keys within local_attention / 2 on either side, a fused Wqkv, a GeGLU MLP
// (act(input) * gate from one Wi), biases only where the config asks.
struct ModernBertOptions {
  float global_theta = 160000.f, local_theta = 10000.f;
  int local_attention = 128;
  std::vector<bool> local;  // per layer: a local (sliding window) layer
  bool attention_bias = false, mlp_bias = false, norm_bias = false;
  // ModernBertForSequenceClassification: the head pools (CLS or the mean
  // over the kept tokens), then norm(act(dense(pooled))), then classifier.
  bool classifier_mean = false, classifier_bias = false;
  Activation classifier_act = Activation::Gelu;
};

struct BertConfig {
  EncoderFamily family = EncoderFamily::Bert;
  std::string model_type;
  std::vector<std::string> architectures;
  int vocab_size = 30522;
  int hidden_size = 768;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int intermediate_size = 3072;
  Activation hidden_act = Activation::Gelu;
  float layer_norm_eps = 1e-12f;
  int max_position_embeddings = 512;
  int type_vocab_size = 2;  // 0: the family has no token types (DistilBERT)
  int pad_token_id = 0;
  int position_offset = 0;  // position of the first token (RoBERTa: pad_token_id + 1)
  NomicOptions nomic;       // family NomicBert only
  ModernBertOptions modernbert;  // family ModernBert only
  // A *ForSequenceClassification checkpoint: a cross-encoder whose pooler
  // and classifier give num_labels logits per text pair.
  bool classifier = false;
  int num_labels = 1;
  // What sentence-transformers' CrossEncoder applies to the logits
  // (config.json's sentence_transformers.activation_fn, or the older
  // sbert_ce_default_activation_function): sigmoid for one label by default.
  enum class ScoreActivation { Identity, Sigmoid } score_activation = ScoreActivation::Sigmoid;
  int head_dim() const { return hidden_size / num_attention_heads; }
  // Tokens per text the position table holds.
  int max_tokens() const { return max_position_embeddings - position_offset; }
};

// Reads <dir>/config.json (or the file itself). Throws rlx::Error naming the
// file and field for a missing file, bad JSON, a value of the wrong type, a
// size outside BertLimits, inconsistent sizes or a model that is not a BERT
// encoder.
BertConfig load_bert_config(const std::string& dir_or_file);

// sentence-transformers' Pooling modes. Mean and Cls are computed in the
// graph; the others on the host from last_hidden_state.
enum class Pooling { Mean, Cls, Max, MeanSqrtLen, WeightedMean, LastToken };
// "mean", "cls", "max", "mean_sqrt_len", "weightedmean", "lasttoken" (and
// sentence-transformers' spellings); throws naming `what` for anything else.
Pooling parse_pooling(const std::string& name, const std::string& what);
const char* pooling_name(Pooling p);

struct SentenceConfig {
  bool present = false;       // modules.json was found
  Pooling pooling = Pooling::Mean;
  bool normalize = false;     // a Normalize module follows pooling
  std::vector<std::string> dense_dirs;  // Dense modules after pooling, in order (their folders)
  std::string transformer_dir;          // the Transformer module's folder: the model dir unless it names one
  int max_seq_length = 0;     // sentence_bert_config.json; 0 = not given
  int tokenizer_max_length = 0;  // tokenizer_config.json's model_max_length; 0 = none or no limit
  bool include_prompt = true;  // the pooling module's include_prompt
  // Texts stripped of surrounding whitespace before tokenizing: what
  // sentence-transformers before 6 did (config_sentence_transformers.json's
  // __version__ says which saved the model; without one, stripped).
  bool strip_texts = true;
  // config_sentence_transformers.json: named prompts ("query" -> "query: ")
  // and the one applied when none is asked for ("" = none).
  std::vector<std::pair<std::string, std::string>> prompts;
  std::string default_prompt_name;
  // A causal-LM cross-encoder (Qwen3-Reranker as sentence-transformers
  // saves it): the LogitScore module's folder, after the Transformer; empty
  // for any other model.
  std::string logit_score_dir;
  // sentence_bert_config.json: the Transformer module's transformer_task
  // ("text-generation" for a causal LM; "" when not given) and, where its
  // modality_config is given, whether it has the message modality and that
  // modality's format ("flat", "structured", "auto").
  std::string transformer_task;
  bool modality_config_given = false, message_modality = false;
  std::string message_format;
  // config_sentence_transformers.json's activation_fn (a CrossEncoder's;
  // "" when absent or null).
  std::string activation_fn;
};

// "torch.nn.modules.activation.Sigmoid" or "...Identity" (the class path
// sentence-transformers saves as a CrossEncoder's activation_fn); anything
// else is refused, the message starting with `where`.
BertConfig::ScoreActivation parse_score_activation(const std::string& s, const std::string& where);

// Reads modules.json, the pooling module's config.json and
// sentence_bert_config.json when present; without modules.json the defaults
// (mean pooling, no normalization) apply. The modules must be Transformer,
// Pooling, any Dense, then Normalize, or Transformer then LogitScore (a
// causal-LM cross-encoder); any other module is refused by name.
SentenceConfig load_sentence_config(const std::string& dir);

// dir / rel for a path named inside a model file, refused (rlx::Error
// starting with `where`) when it is absolute, climbs with "..", or is a
// folder whose real location is outside dir.
std::filesystem::path confined_path(const std::filesystem::path& dir, const std::string& rel,
                                    const std::string& where);

}  // namespace rlx
