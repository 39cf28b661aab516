// Sentence embeddings and cross-encoder scores from a Hugging Face
// directory (config.json, tokenizer files, model.safetensors,
// sentence-transformers modules) of a BERT-family encoder or, as an
// embedder, of a decoder family rlx generates with (Qwen3-Embedding,
// gte-Qwen2: last-token pooling, instruction prompts) or, as a
// cross-encoder, of such a decoder with sentence-transformers' LogitScore
// module (Qwen3-Reranker), or from a GGUF file
// of a BERT embedder (general.architecture "bert", as llama.cpp's
// convert_hf_to_gguf.py writes bge-small or all-MiniLM: pooling from
// bert.pooling_type, L2-normalized unless EmbedderOptions::normalize says
// Off): the tokenizer and the model, compiled per (batch, seq) bucket on
// first use.
#pragma once
#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlx/options.h"
#include "rlx/dtype.h"

namespace rlx {

// sentence-transformers' pooling modes; Model keeps what 1_Pooling/config.json says.
enum class PoolingMode { Model, Mean, Cls, Max, MeanSqrtLen, WeightedMean, LastToken };
// Model: L2-normalize when modules.json ends in a Normalize module.
enum class NormalizeMode { Model, On, Off };

struct EmbedderOptions {
  DType dtype = DType::F32;
  Device device = Device::Cpu;
  int device_index = 0;  // CUDA: which GPU
  // CPU only (--quantize int8): the encoder's products over weights in int8,
  // the weights quantized per output column when first packed and the
  // activations per token (AVX512-VNNI); attention, norms and the rest stay
  // in `dtype` (bf16 is the faster). Embeddings within ~1e-2 of f32's
  // (docs/PERF.md); GPU and processors without VNNI refuse.
  bool int8_products = false;
  int max_batch = 32;  // a power of two, at most kMaxBatch; larger inputs are chunked
  int max_len = 0;     // tokens per text incl. [CLS]/[SEP]; 0 = the model's own limit
  bool truncate = true;  // false: a text longer than max_len is an error, not cut
  static constexpr int kMaxBatch = 1024;
  int threads = 0;     // CPU threads, 0 = physical cores
  PoolingMode pooling = PoolingMode::Model;
  NormalizeMode normalize = NormalizeMode::Model;
  // Matryoshka: keep the first truncate_dim values (0 = all), then normalize
  // if normalizing.
  int truncate_dim = 0;
  // The prompt put before every text, as sentence-transformers' encode():
  // `prompt` when set (an empty string = none), else the prompt named
  // `prompt_name` in config_sentence_transformers.json, else the model's
  // default_prompt_name there.
  std::string prompt_name;
  std::optional<std::string> prompt;
  // A reranker published as a plain causal LM (config.json, tokenizer,
  // weights; no sentence-transformers files), scored as its model card
  // says: "qwen3-reranker" (Qwen3-Reranker: its instruction template, the
  // "yes"/"no" logits, sigmoid, at most 8192 tokens a pair). Such a
  // directory is a cross-encoder only with this set; "" = the directory's
  // own files decide.
  std::string reranker_recipe;
};

// Per call: overrides EmbedderOptions' prompt (a server embeds queries and
// passages with one Embedder; a causal-LM cross-encoder's instruction, per
// request), and reports which texts (pairs) were cut.
struct EmbedCall {
  std::string prompt_name;
  std::optional<std::string> prompt;
  std::vector<uint8_t>* truncated = nullptr;  // when set: 1 per text that was cut, in order
  int max_batch = 0;  // texts per run (a power of two in [1, kMaxBatch]); 0: EmbedderOptions::max_batch
};

struct Bucket {
  int64_t batch = 0, seq = 0;
  auto operator<=>(const Bucket&) const = default;
};

// Token ids with the model's special tokens ([CLS] ... [SEP] for BERT).
struct TokenizedText {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  bool truncated = false;  // tokens were dropped to fit max_len
};

// The embedder's tokenizer, whichever kind the model uses.
class EmbeddingTokenizer {
 public:
  virtual ~EmbeddingTokenizer() = default;
  virtual std::string kind() const = 0;  // "wordpiece"
  // At most max_len tokens in all, special tokens included.
  virtual TokenizedText encode(std::string_view text, int max_len) const = 0;
  // A text pair as a cross-encoder reads it, cut longest-first.
  virtual TokenizedText encode_pair(std::string_view a, std::string_view b, int max_len) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;  // without special tokens
  virtual std::string token_text(int32_t id) const = 0;                   // "" when unknown
  virtual int32_t token_id(const std::string& token) const = 0;           // -1 when absent
  virtual size_t vocab_size() const = 0;
  virtual int32_t pad_id() const = 0;
};

// What the model directory says, after EmbedderOptions' overrides.
struct EmbedderInfo {
  std::string model_type, architecture;  // config.json
  int hidden_size = 0, num_layers = 0, num_heads = 0, intermediate_size = 0, vocab_size = 0,
      max_position_embeddings = 0, type_vocab_size = 0;
  // A *ForSequenceClassification model, or a *ForCausalLM with a LogitScore
  // module: score(), not embed().
  bool cross_encoder = false;
  // A cross-encoder that takes a prompt: a causal LM's, as its system
  // message (a sequence-classification cross-encoder takes none).
  bool pair_prompt = false;
  int num_labels = 0;
  std::string score_activation;  // "sigmoid" or "identity"
  std::string pooling;           // "mean", "cls", "max", "mean_sqrt_len", "weightedmean", "lasttoken"
  bool normalize = false;
  int dim = 0;  // values per embedding
  std::vector<std::pair<std::string, std::string>> prompts;  // config_sentence_transformers.json
  std::string default_prompt_name;
};

// Embeddings left on the GPU (Embedder::embed_on_device): [rows, dim]
// float32, row-major, in input order, in memory of CUDA device `device`
// that `data` owns (freed with its last copy).
struct DeviceEmbeddings {
  std::shared_ptr<float> data;
  size_t rows = 0, dim = 0;
  int device = -1;
};

// Thread safety: embed() may be called on one Embedder from several threads
// at once; the calls are serialised (one runs at a time), so each returns
// what it would alone. The accessors below that report on past calls
// (compiled_buckets, buckets_used, truncated_texts) must not be called while
// another thread is inside embed(). For parallel throughput, use one
// Embedder per thread.
class Embedder {
 public:
  Embedder(const std::string& model_dir, const EmbedderOptions& opts = {});
  ~Embedder();

  // One embedding per text, in order; L2-normalized when the model's
  // modules.json ends in a Normalize module. A text longer than max_len()
  // tokens is cut (counted in truncated_texts()), or an error when
  // EmbedderOptions::truncate is false. A cross-encoder refuses (score()).
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts);
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts, const EmbedCall& call);
  // The same with at most max_batch texts per run (a power of two in
  // [1, kMaxBatch]) in place of EmbedderOptions::max_batch.
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts, int max_batch);
  size_t truncated_texts() const;  // texts cut so far
  // The same embeddings left on the GPU (for torch.from_dlpack): pooled,
  // cut to truncate_dim and normalised there, never copied through the
  // host. `normalize` L2-normalises also where the model has no Normalize
  // module. Only a CUDA embedder whose pooling runs in the graph (an
  // encoder's mean or cls, a decoder's lasttoken) with no Dense module
  // after it; anything else is an error saying which. No texts: no buffer
  // (data empty).
  DeviceEmbeddings embed_on_device(const std::vector<std::string>& texts, const EmbedCall& call = {},
                                   bool normalize = false);

  // Cross-encoders: one score per (query, document) pair, in order, with
  // the activation sentence-transformers' CrossEncoder applies (sigmoid for
  // one label unless config_sentence_transformers.json or config.json says
  // otherwise); logits() without it. A causal LM with a LogitScore module
  // (Qwen3-Reranker) renders each pair through its chat template, with
  // EmbedderOptions' prompt (or prompt_name, or the default prompt) as the
  // system message, and scores logit(true token) - logit(false token) at the
  // last token; so does a plain causal LM with EmbedderOptions::reranker_recipe. A model with more than one label, or an embedding model,
  // refuses; so does a score that is not finite.
  std::vector<float> score(const std::string& query, const std::vector<std::string>& documents);
  std::vector<float> logits(const std::string& query, const std::vector<std::string>& documents);
  // The same with the call's prompt (or prompt_name) in place of
  // EmbedderOptions'; one given to a model that takes none
  // (info().pair_prompt false) is an error, never dropped.
  std::vector<float> score(const std::string& query, const std::vector<std::string>& documents,
                           const EmbedCall& call);
  std::vector<float> logits(const std::string& query, const std::vector<std::string>& documents,
                            const EmbedCall& call);
  // The same for pairs whose queries differ (sentence-transformers'
  // CrossEncoder.predict): one score per (query, document) pair, in order,
  // the pairs batched together whatever their query.
  std::vector<float> score_pairs(const std::vector<std::pair<std::string, std::string>>& pairs,
                                 const EmbedCall& call = {});
  std::vector<float> logits_pairs(const std::vector<std::pair<std::string, std::string>>& pairs,
                                  const EmbedCall& call = {});
  bool is_cross_encoder() const;

  // The prompt text a name stands for in config_sentence_transformers.json;
  // throws listing the names there when absent.
  std::string prompt(const std::string& name) const;

  int dim() const;
  int max_len() const;
  bool normalizes() const;
  const EmbeddingTokenizer& tokenizer() const;
  const EmbedderInfo& info() const;
  size_t compiled_buckets() const;
  const std::vector<Bucket>& buckets_used() const;

  // Smallest bucket holding `count` texts of up to `longest` tokens: batch a
  // power of two, at most max_batch; seq at least 16 and at most max_seq, a
  // multiple of 16 up to 128, then eight steps per doubling (160, 192, ...).
  static Bucket bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

void l2_normalize(std::vector<float>& v);

// A model directory, or a Hub id ("org/name", "org/name@revision") resolved
// in the local Hugging Face cache (HF_HUB_CACHE, else $HF_HOME/hub, else
// ~/.cache/huggingface/hub): the snapshot that refs/<revision> names. An
// existing directory or file (a .gguf), or a string that is no Hub id, comes back unchanged;
// an id that is not cached is an error listing the places looked in.
std::string resolve_model_dir(const std::string& path_or_hub_id);
bool is_hub_id(const std::string& s);

}  // namespace rlx
