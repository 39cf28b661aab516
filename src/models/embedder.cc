#include "models/embedder.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string_view>
#include <thread>

#include "backends/backend.h"
#include "backends/cpu/cpu_quant_dot.h"
#include "models/bert.h"
#include "models/bert_gguf.h"
#include "models/bucket_cache.h"
#include "models/causal_reranker.h"
#include "models/embedding_tokenizer.h"
#include "models/gguf.h"
#include "models/hf_config.h"
#include "models/json_read.h"
#include "models/llama_hf.h"
#include "models/reranker_recipe.h"
#include "models/sentence_dense.h"
#include "models/sentence_pooling.h"
#include "rlx/error.h"

namespace rlx {

// Everything the embedder holds: the public header (rlx/embedder.h) shows
// none of the internal types.
struct Embedder::Impl {
  Impl(const std::string& dir, const EmbedderOptions& opts);
  // Runs one chunk of at most max_batch encodings; `take` gets each row's
  // result: its pooled vector, or its logits for a cross-encoder.
  void run_chunk(const std::vector<const TokenizedText*>& encs, int max_batch,
                 const std::function<void(size_t, std::vector<float>)>& take);
  // Pads the chunk into its bucket and runs it; b and lengths tell the
  // bucket and each row's tokens.
  std::map<std::string, HostTensor> run_bucket(const std::vector<const TokenizedText*>& encs, int max_batch,
                                               Executable** exe, Bucket* b, std::vector<size_t>* lengths);
  // The input order sorted by length (similar lengths share a chunk, so
  // padding stays small), with the arena reserved for the largest chunk.
  std::vector<size_t> length_order(const std::vector<TokenizedText>& encs, int max_batch);
  // Sorted by length into chunks (little padding), results in input order.
  std::vector<std::vector<float>> run_all(const std::vector<TokenizedText>& encs, int max_batch);
  int batch_of(const EmbedCall& call) const;
  // The texts as the model reads them (prompt, strip, cut to max_len).
  std::vector<TokenizedText> tokenize_all(const std::vector<std::string>& texts, const EmbedCall& call);
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts, const EmbedCall& call);
  DeviceEmbeddings embed_on_device(const std::vector<std::string>& texts, const EmbedCall& call, bool normalize);
  // queries: one for every document, or one per document.
  std::vector<float> score(const std::vector<std::string>& queries, const std::vector<std::string>& docs,
                           bool activate, const EmbedCall& call);
  // Refuses a prompt for a cross-encoder that takes none, naming `dir_`.
  void check_pair_prompt(const std::string& prompt_name, const std::optional<std::string>& prompt) const;
  std::string prompt_text(const std::string& name) const;
  std::string prompt_for(const std::string& name, const std::optional<std::string>& text) const;

  // The graph of one bucket, from the encoder's builder or the decoder's.
  Graph graph_for(int64_t batch, int64_t seq) const;
  // Pooling computed by the graph (`embedding`); the rest on the host.
  bool pools_in_graph() const;

  std::string dir_;
  SentenceConfig sentence_;
  // A decoder family's Transformer module (Qwen3-Embedding, gte-Qwen2):
  // llama.h's stack without its LM head, its config and weights from
  // llama_hf.h. cfg_ then holds only the sizes every model reports.
  std::unique_ptr<LlamaSafetensors> decoder_;
  // A decoder as a cross-encoder (Qwen3-Reranker: modules.json's LogitScore):
  // its pairs' template and tokens, and the score from the last token's
  // hidden state. cfg_.classifier is set, with one label.
  std::unique_ptr<CausalReranker> reranker_;
  BertConfig cfg_;
  std::unique_ptr<EmbeddingTokenizer> tokenizer_;
  std::unique_ptr<EncoderWeights> weights_;  // an encoder's: model.safetensors or a GGUF file
  std::map<std::string, QuantType> quantized_;  // a GGUF's dense weights held quantized (BertGraphParts)
  EmbedderOptions opts_;
  std::vector<SentenceDense> dense_;  // after pooling, before Normalize
  int pooled_dim_ = 0;                // values per embedding before truncate_dim
  Pooling pooling_ = Pooling::Mean;
  bool normalize_ = false;
  EmbedderInfo info_;
  int max_len_ = 512;
  std::unique_ptr<BucketCache> buckets_;  // one arena and one copy of the weights for every bucket
  size_t truncated_ = 0;
  std::mutex mutex_;  // one embed() at a time: the buckets share one arena
};

void l2_normalize(std::vector<float>& v) {
  double ss = 0;
  for (float x : v) ss += double(x) * x;
  // sentence-transformers clamps the norm at 1e-12 to keep zero vectors finite.
  double n = std::max(std::sqrt(ss), 1e-12);
  for (float& x : v) x = float(x / n);
}

Bucket Embedder::bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch) {
  return rlx::bucket_for(count, longest, max_seq, max_batch);
}

namespace {

Pooling pooling_of(PoolingMode m, Pooling model) {
  switch (m) {
    case PoolingMode::Model: return model;
    case PoolingMode::Mean: return Pooling::Mean;
    case PoolingMode::Cls: return Pooling::Cls;
    case PoolingMode::Max: return Pooling::Max;
    case PoolingMode::MeanSqrtLen: return Pooling::MeanSqrtLen;
    case PoolingMode::WeightedMean: return Pooling::WeightedMean;
    case PoolingMode::LastToken: return Pooling::LastToken;
  }
  return model;
}

bool pooled_in_graph(Pooling p) { return p == Pooling::Mean || p == Pooling::Cls; }

// The model_type of <dir>/config.json ("" when it names none).
std::string model_type_of(const std::string& dir) {
  const std::filesystem::path file = std::filesystem::path(dir) / "config.json";
  if (!std::filesystem::exists(file)) return "";
  const nlohmann::json doc = read_json_file(file);
  JsonField j(doc, file.string());
  j.object();
  return j.string_or("model_type", "");
}

// The sentence-transformers files of a model directory; a GGUF file has none.
SentenceConfig sentence_config_of(const std::string& path) {
  if (is_gguf_file(path)) return {};
  std::error_code ec;
  RLX_CHECK(!std::filesystem::is_regular_file(path, ec) && !std::filesystem::is_fifo(path, ec),
            "embedder: '" << path << "' is a file but not a GGUF file (a model is a Hugging Face directory or a "
                                     "BERT .gguf)");
  return load_sentence_config(path);
}

// A decoder as a Transformer module: its config (load_llama_config), and
// the sizes every embedder reports in cfg's fields.
std::unique_ptr<LlamaSafetensors> open_decoder(const std::string& dir, BertConfig& cfg) {
  const std::filesystem::path file = std::filesystem::path(dir) / "config.json";
  const nlohmann::json doc = read_json_file(file);
  JsonField j(doc, file.string());
  if (j.has("architectures")) {
    JsonField a = j.at("architectures");
    for (size_t i = 0; i < a.size(); ++i) cfg.architectures.push_back(a.at(i).string());
  }
  const std::string arch = cfg.architectures.empty() ? "" : cfg.architectures[0];
  auto ends_with = [&](const std::string& tail) {
    return arch.size() >= tail.size() && arch.compare(arch.size() - tail.size(), tail.size(), tail) == 0;
  };
  RLX_CHECK(arch.empty() || ends_with("Model") || ends_with("ForCausalLM"),
            "'" << file.string() << "': architecture '" << arch
                << "' is not supported as an embedder (a decoder's *Model or *ForCausalLM is: its hidden states "
                   "are pooled, its head left aside)");
  auto d = std::make_unique<LlamaSafetensors>(dir);
  const LlamaConfig& c = d->config();
  cfg.model_type = c.family;
  cfg.vocab_size = c.vocab_size;
  cfg.hidden_size = c.hidden_size;
  cfg.num_hidden_layers = c.num_layers;
  cfg.num_attention_heads = c.num_heads;
  cfg.intermediate_size = c.intermediate_size;
  cfg.max_position_embeddings = c.max_positions;
  cfg.type_vocab_size = 0;
  cfg.position_offset = 0;
  return d;
}

// A decoder with its LM head (Qwen3ForCausalLM), whose logits a reranker reads.
bool is_causal_lm(const std::string& architecture) {
  const std::string tail = "ForCausalLM";
  return architecture.size() > tail.size() &&
         architecture.compare(architecture.size() - tail.size(), tail.size(), tail) == 0;
}

// The length of the whitespace character (as Python's str.isspace) that
// starts s at i, 0 for none.
size_t space_at(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  auto is = [&](std::string_view seq) { return s.substr(i, seq.size()) == seq; };
  if (is("\xc2\x85") || is("\xc2\xa0")) return 2;
  if (is("\xe1\x9a\x80") || is("\xe3\x80\x80") || is("\xe2\x80\xa8") || is("\xe2\x80\xa9") ||
      is("\xe2\x80\xaf") || is("\xe2\x81\x9f"))
    return 3;
  if (i + 2 < s.size() && c == 0xe2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
      static_cast<unsigned char>(s[i + 2]) >= 0x80 && static_cast<unsigned char>(s[i + 2]) <= 0x8a)
    return 3;  // U+2000..U+200A
  return 0;
}

// sentence-transformers before 6 strips each text (prompt included) before
// tokenizing; with byte-level BPE a leading space would change the tokens.
std::string strip_spaces(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    size_t n = space_at(s, b);
    if (!n) break;
    b += n;
  }
  size_t e = s.size();
  while (e > b) {
    size_t k = e - 1;  // back to the start of the last character
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    size_t n = space_at(s, k);
    if (!n || k + n != e) break;
    e = k;
  }
  return std::string(s.substr(b, e - b));
}

}  // namespace

Embedder::Impl::Impl(const std::string& dir, const EmbedderOptions& opts)
    : dir_(dir), sentence_(sentence_config_of(dir)), opts_(opts) {
  const std::string& tdir = sentence_.transformer_dir;
  if (is_gguf_file(dir)) {
    // A BERT or NomicBERT GGUF (llama.cpp's converter): no
    // sentence-transformers files, so the pooling is <arch>.pooling_type's and the vectors are
    // L2-normalized, as llama.cpp's embedding example and server do by
    // default (EmbedderOptions::normalize overrides it).
    RLX_CHECK(opts_.reranker_recipe.empty(), "embedder: '" << dir << "' is a GGUF file of an encoder; the "
                                                             << opts_.reranker_recipe
                                                             << " recipe is for a causal LM's Hugging Face directory");
    auto w = std::make_unique<BertGguf>(dir);
    cfg_ = w->config();
    // f32 on the CPU's integer kernels: the quantized products stay
    // quantized (1.25x the expanded f32 products on MiniLM Q8_0; the f32
    // kernel reads the expanded floats faster, and bf16's packed products
    // are faster than the two-digit integer ones: docs/PERF.md).
    if (opts.device == Device::Cpu && opts.dtype == DType::F32 && cpu::quant_kernel() != cpu::QuantKernel::F32)
      quantized_ = w->held_weights();
    tokenizer_ = load_gguf_embedding_tokenizer(w->file());
    const std::optional<Pooling> pooling = bert_pooling_from_gguf(w->file());
    RLX_CHECK(pooling || opts.pooling != PoolingMode::Model,
              "embedder: '" << dir << "': " << w->file().get_string("general.architecture")
                            << ".pooling_type is absent or 0 (none: token vectors); choose a pooling "
                               "(EmbedderOptions::pooling, --pooling)");
    sentence_.pooling = pooling.value_or(Pooling::Mean);
    sentence_.normalize = true;
    weights_ = std::move(w);
  } else if (!opts_.reranker_recipe.empty()) {
    // The user says this plain causal LM directory is a reranker the recipe scores.
    const RerankerRecipe& recipe = reranker_recipe(opts_.reranker_recipe);
    RLX_CHECK(!sentence_.present,
              "embedder: '" << dir << "' has modules.json: it is a sentence-transformers model, whose own modules say "
                            << "how it scores; the " << recipe.name
                            << " recipe is for a plain causal LM directory (leave the recipe unset)");
    RLX_CHECK(is_llama_hf_model_type(model_type_of(dir)),
              "embedder: '" << dir << "': config.json's model_type '" << model_type_of(dir)
                            << "' is no decoder rlx runs, so the " << recipe.name << " recipe cannot score it ("
                            << llama_hf_model_types() << ")");
    decoder_ = open_decoder(dir, cfg_);
    const std::string arch = cfg_.architectures.empty() ? "" : cfg_.architectures[0];
    RLX_CHECK(is_causal_lm(arch),
              "embedder: '" << dir << "/config.json': architecture '" << arch << "' is not a *ForCausalLM, whose LM "
                            << "head gives the " << recipe.name << " recipe's yes/no logits");
    tokenizer_ = load_decoder_embedding_tokenizer(dir);
    reranker_ = std::make_unique<CausalReranker>(dir, recipe, *decoder_);
    cfg_.classifier = true;
    cfg_.num_labels = 1;
    cfg_.score_activation = reranker_->activation();
  } else if (is_llama_hf_model_type(model_type_of(tdir))) {
    decoder_ = open_decoder(tdir, cfg_);
    tokenizer_ = load_decoder_embedding_tokenizer(tdir);
    if (!sentence_.logit_score_dir.empty()) {
      reranker_ = std::make_unique<CausalReranker>(sentence_, *decoder_);
      cfg_.classifier = true;
      cfg_.num_labels = 1;
      cfg_.score_activation = reranker_->activation();
    }
  } else {
    RLX_CHECK(sentence_.logit_score_dir.empty(),
              "embedder: '" << dir << "': modules.json names a LogitScore module, which scores a causal LM's logits, "
                            << "but config.json's model_type '" << model_type_of(tdir) << "' is no decoder rlx runs ("
                            << llama_hf_model_types() << ")");
    cfg_ = load_bert_config(tdir);
    // sentence-transformers 4+ saves a CrossEncoder's activation in
    // config_sentence_transformers.json, which wins over config.json's.
    if (cfg_.classifier && !sentence_.activation_fn.empty())
      cfg_.score_activation = parse_score_activation(
          sentence_.activation_fn,
          "'" + (std::filesystem::path(dir) / "config_sentence_transformers.json").string() + "': activation_fn: ");
    tokenizer_ = load_embedding_tokenizer(tdir, cfg_.family);
    weights_ = std::make_unique<BertWeights>((std::filesystem::path(tdir) / "model.safetensors").string());
  }
  RLX_CHECK(opts_.max_batch >= 1 && opts_.max_batch <= EmbedderOptions::kMaxBatch &&
                (opts_.max_batch & (opts_.max_batch - 1)) == 0,
            "embedder: max_batch " << opts_.max_batch << " must be a power of two in [1, "
                                   << EmbedderOptions::kMaxBatch << "]");
  RLX_CHECK(int64_t(tokenizer_->vocab_size()) <= cfg_.vocab_size,
            "embedder: '" << dir << "': the tokenizer gives ids up to " << tokenizer_->vocab_size() - 1
                          << " but the model's vocab_size is " << cfg_.vocab_size);
  pooled_dim_ = cfg_.hidden_size;
  for (const std::string& d : sentence_.dense_dirs) {
    dense_.emplace_back(d);
    RLX_CHECK(dense_.back().in_features() == pooled_dim_,
              "embedder: '" << d << "': the Dense module takes " << dense_.back().in_features()
                            << " values, the module before it gives " << pooled_dim_);
    pooled_dim_ = dense_.back().out_features();
  }
  RLX_CHECK(opts_.truncate_dim >= 0 && opts_.truncate_dim <= pooled_dim_,
            "embedder: truncate_dim " << opts_.truncate_dim << " is outside [0, " << pooled_dim_
                                      << "] (the model's dimension)");
  RLX_CHECK(opts_.max_len >= 0, "embedder: max_len " << opts_.max_len << " is negative");
  // A causal cross-encoder reads the last token's final-normed hidden state.
  pooling_ = reranker_ ? Pooling::LastToken : pooling_of(opts_.pooling, sentence_.pooling);
  normalize_ = opts_.normalize == NormalizeMode::Model ? sentence_.normalize : opts_.normalize == NormalizeMode::On;
  max_len_ = cfg_.max_tokens();
  if (sentence_.max_seq_length > 0) max_len_ = std::min(max_len_, sentence_.max_seq_length);
  else if (sentence_.tokenizer_max_length > 0) max_len_ = std::min(max_len_, sentence_.tokenizer_max_length);
  if (reranker_ && reranker_->max_length() > 0) max_len_ = std::min(max_len_, reranker_->max_length());
  if (opts_.max_len > 0) max_len_ = std::min(max_len_, opts_.max_len);
  RLX_CHECK(max_len_ >= 3, "embedder: max_len " << max_len_ << " leaves no room for a text");
  // The default prompt must exist now, not at the first embed() (a causal
  // cross-encoder's prompt is its system message).
  if (!cfg_.classifier || reranker_) prompt_for(opts_.prompt_name, opts_.prompt);
  check_pair_prompt(opts_.prompt_name, opts_.prompt);

  info_.model_type = cfg_.model_type;
  info_.architecture = cfg_.architectures.empty() ? "" : cfg_.architectures[0];
  info_.hidden_size = cfg_.hidden_size;
  info_.num_layers = cfg_.num_hidden_layers;
  info_.num_heads = cfg_.num_attention_heads;
  info_.intermediate_size = cfg_.intermediate_size;
  info_.vocab_size = cfg_.vocab_size;
  info_.max_position_embeddings = cfg_.max_position_embeddings;
  info_.type_vocab_size = cfg_.type_vocab_size;
  info_.cross_encoder = cfg_.classifier;
  info_.pair_prompt = reranker_ != nullptr;
  info_.num_labels = cfg_.classifier ? cfg_.num_labels : 0;
  info_.score_activation = !cfg_.classifier ? ""
                           : cfg_.score_activation == BertConfig::ScoreActivation::Sigmoid ? "sigmoid"
                                                                                          : "identity";
  info_.pooling = cfg_.classifier ? "" : pooling_name(pooling_);
  info_.normalize = !cfg_.classifier && normalize_;
  info_.dim = cfg_.classifier ? 0 : opts_.truncate_dim > 0 ? opts_.truncate_dim : pooled_dim_;
  info_.prompts = sentence_.prompts;
  info_.default_prompt_name = sentence_.default_prompt_name;

  // Fail on missing or misshapen weights now, not at the first bucket.
  if (decoder_) {
    decoder_->validate(graph_for(1, 2));
  } else {
    weights_->check_sizes(cfg_);
    weights_->validate(graph_for(1, 2));
  }
  CompileOptions co;
  co.device = opts_.device;
  co.device_index = opts_.device_index;
  co.threads = opts_.threads;
  co.int8_products = opts_.int8_products;
  buckets_ = std::make_unique<BucketCache>(
      "embed", [this](const Bucket& b) { return graph_for(b.batch, b.seq); },
      [this](Executable& exe, const Graph& g) {
        if (decoder_) decoder_->load_into(exe, g);
        else weights_->load_into(exe, g);
      },
      co);
}

bool Embedder::Impl::pools_in_graph() const {
  return decoder_ ? pooling_ == Pooling::LastToken : pooled_in_graph(pooling_);
}

Graph Embedder::Impl::graph_for(int64_t batch, int64_t seq) const {
  // A decoder gives last-token pooling's rows itself, every row otherwise.
  if (decoder_)
    return build_llama_hidden_graph(decoder_->config(), batch, seq, opts_.dtype,
                                    pools_in_graph() ? LlamaHidden::Rows : LlamaHidden::All);
  BertGraphParts parts;
  parts.quantized = quantized_;
  return build_bert_graph(cfg_, pooling_, batch, seq, opts_.dtype, parts);
}

void Embedder::Impl::check_pair_prompt(const std::string& prompt_name,
                                       const std::optional<std::string>& prompt) const {
  RLX_CHECK(!cfg_.classifier || reranker_ || (prompt_name.empty() && !prompt),
            "embedder: '" << dir_ << "' is a sequence-classification cross-encoder; rlx applies a prompt only to a "
                          << "causal-LM cross-encoder (as its system message), so prompt_name / prompt must be unset");
}

std::string Embedder::Impl::prompt_text(const std::string& name) const {
  std::string names;
  for (const auto& [n, text] : sentence_.prompts) {
    if (n == name) return text;
    names += (names.empty() ? "" : ", ") + n;
  }
  RLX_FAIL("embedder: '" << dir_ << "' has no prompt named '" << name << "' ("
                         << (names.empty() ? "config_sentence_transformers.json gives none"
                                           : "config_sentence_transformers.json gives: " + names)
                         << ")");
}

std::string Embedder::Impl::prompt_for(const std::string& name, const std::optional<std::string>& text) const {
  std::string p = text ? *text
                  : !name.empty() ? prompt_text(name)
                  : !sentence_.default_prompt_name.empty() ? prompt_text(sentence_.default_prompt_name)
                                                           : "";
  // sentence-transformers would leave the prompt out of the pooling.
  RLX_CHECK(p.empty() || sentence_.include_prompt,
            "embedder: '" << dir_ << "': the pooling module's include_prompt is false, which rlx does "
                             "not support with a prompt");
  return p;
}

std::map<std::string, HostTensor> Embedder::Impl::run_bucket(const std::vector<const TokenizedText*>& encs,
                                                             int max_batch, Executable** exe_out, Bucket* b_out,
                                                             std::vector<size_t>* lengths_out) {
  int64_t longest = 0;
  for (const TokenizedText* e : encs) longest = std::max<int64_t>(longest, int64_t(e->ids.size()));
  Bucket b = bucket_for(int64_t(encs.size()), longest, max_len_, max_batch);
  Executable& exe = buckets_->get(b);
  const size_t S = size_t(b.seq);
  std::vector<int32_t> ids(size_t(b.batch) * S, tokenizer_->pad_id()), mask(ids.size(), 0),
      types(ids.size(), 0);
  std::vector<size_t> lengths(size_t(b.batch), 1);
  for (size_t r = 0; r < size_t(b.batch); ++r) {
    if (r < encs.size()) {
      const TokenizedText& e = *encs[r];
      std::copy(e.ids.begin(), e.ids.end(), ids.begin() + long(r * S));
      std::fill(mask.begin() + long(r * S), mask.begin() + long(r * S + e.ids.size()), 1);
      std::copy(e.type_ids.begin(), e.type_ids.end(), types.begin() + long(r * S));
      lengths[r] = e.ids.size();
    } else {
      // Filler rows keep one token so no row is fully masked; their results are dropped.
      ids[r * S] = encs[0]->ids[0];
      mask[r * S] = 1;
    }
  }
  Shape shape{b.batch, b.seq};
  std::map<std::string, HostTensor> in{{"input_ids", HostTensor::from_i32(shape, ids)}};
  if (decoder_) {
    // Right padding: a row's tokens sit at positions 0..n-1 and its pads
    // after them, which the causal mask keeps from every real token (a
    // left-padding tokenizer gives the same vectors: rotary attention sees
    // only relative positions). Last-token pooling reads row r's token n-1.
    std::vector<int32_t> positions(S), last(size_t(b.batch));
    std::iota(positions.begin(), positions.end(), 0);
    for (size_t r = 0; r < size_t(b.batch); ++r) last[r] = int32_t(r * S + lengths[r] - 1);
    in.emplace("positions", HostTensor::from_i32({b.seq}, positions));
    if (pools_in_graph()) in.emplace("last_index", HostTensor::from_i32({b.batch}, last));
  } else {
    in.emplace("attention_mask", HostTensor::from_i32(shape, mask));
    if (cfg_.type_vocab_size > 0) in.emplace("token_type_ids", HostTensor::from_i32(shape, types));
  }
  *exe_out = &exe;
  *b_out = b;
  *lengths_out = std::move(lengths);
  return exe.run(in);
}

void Embedder::Impl::run_chunk(const std::vector<const TokenizedText*>& encs, int max_batch,
                               const std::function<void(size_t, std::vector<float>)>& take) {
  Executable* exe = nullptr;
  Bucket b;
  std::vector<size_t> lengths;
  auto result = run_bucket(encs, max_batch, &exe, &b, &lengths);
  const size_t S = size_t(b.seq);
  auto output = [&](const char* name, size_t per_row) {
    auto it = result.find(name);
    RLX_CHECK(it != result.end(), "embedder: the executable returned no '" << name << "'");
    std::vector<float> all = it->second.to_f32();
    RLX_CHECK(all.size() == size_t(b.batch) * per_row,
              "embedder: " << name << " has " << all.size() << " values, expected " << b.batch * per_row);
    return all;
  };
  const size_t H = size_t(cfg_.hidden_size);
  if (reranker_) {
    std::vector<float> all = output("embedding", H);
    for (size_t r = 0; r < encs.size(); ++r) take(r, {reranker_->logit(all.data() + r * H)});
    return;
  }
  if (cfg_.classifier) {
    const size_t L = size_t(cfg_.num_labels);
    std::vector<float> all = output("logits", L);
    for (size_t r = 0; r < encs.size(); ++r)
      take(r, std::vector<float>(all.begin() + long(r * L), all.begin() + long((r + 1) * L)));
    return;
  }
  std::vector<float> all;
  if (pools_in_graph()) {
    all = output("embedding", H);
  } else {
    std::vector<float> hidden = output("last_hidden_state", S * H);
    all.resize(size_t(b.batch) * H);
    for (size_t r = 0; r < encs.size(); ++r)
      pool_tokens(pooling_, hidden.data() + r * S * H, lengths[r], H, all.data() + r * H);
  }
  const size_t D = opts_.truncate_dim > 0 ? size_t(opts_.truncate_dim) : size_t(pooled_dim_);
  for (size_t r = 0; r < encs.size(); ++r) {
    std::vector<float> v(all.begin() + long(r * H), all.begin() + long((r + 1) * H));
    for (const SentenceDense& d : dense_) v = d.apply(v);
    v.resize(D);
    if (normalize_) l2_normalize(v);
    take(r, std::move(v));
  }
}

std::vector<size_t> Embedder::Impl::length_order(const std::vector<TokenizedText>& encs, int max_batch) {
  std::vector<size_t> order(encs.size());
  std::iota(order.begin(), order.end(), 0);
  // RLX_EMBED_SORT=0 keeps the input order (for measuring what sorting buys).
  static const bool sort = [] {
    const char* v = std::getenv("RLX_EMBED_SORT");
    return !v || std::string_view(v) != "0";
  }();
  if (sort)
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return encs[a].ids.size() < encs[b].ids.size(); });
  Bucket largest;
  for (size_t start = 0; start < order.size(); start += size_t(max_batch)) {
    size_t end = std::min(order.size(), start + size_t(max_batch));
    size_t longest = 0;
    for (size_t i = start; i < end; ++i) longest = std::max(longest, encs[order[i]].ids.size());
    Bucket b = bucket_for(int64_t(end - start), int64_t(longest), max_len_, max_batch);
    largest = {std::max(largest.batch, b.batch), std::max(largest.seq, b.seq)};
  }
  // The arena is sized for the largest bucket this input needs, not for the
  // largest possible one: one short sentence must not reserve max_batch x
  // max_len. A larger input later replaces the arena (and recompiles).
  buckets_->reserve(largest);
  return order;
}

std::vector<std::vector<float>> Embedder::Impl::run_all(const std::vector<TokenizedText>& encs, int max_batch) {
  std::vector<std::vector<float>> out(encs.size());
  if (encs.empty()) return out;
  const std::vector<size_t> order = length_order(encs, max_batch);
  for (size_t start = 0; start < order.size(); start += size_t(max_batch)) {
    size_t end = std::min(order.size(), start + size_t(max_batch));
    std::vector<const TokenizedText*> chunk;
    for (size_t i = start; i < end; ++i) chunk.push_back(&encs[order[i]]);
    run_chunk(chunk, max_batch, [&](size_t r, std::vector<float> v) { out[order[start + r]] = std::move(v); });
  }
  return out;
}

int Embedder::Impl::batch_of(const EmbedCall& call) const {
  const int max_batch = call.max_batch ? call.max_batch : opts_.max_batch;
  RLX_CHECK(max_batch >= 1 && max_batch <= EmbedderOptions::kMaxBatch && (max_batch & (max_batch - 1)) == 0,
            "embedder: max_batch " << max_batch << " must be a power of two in [1, " << EmbedderOptions::kMaxBatch
                                   << "]");
  return max_batch;
}

size_t embed_tokenize_threads(size_t texts, Device device, int threads) {
  size_t n = std::max<size_t>(1, std::thread::hardware_concurrency());
  if (device == Device::Cpu && threads > 0) n = std::min(n, size_t(threads));
  return std::max<size_t>(1, std::min({n, size_t(8), texts / 512}));
}

std::vector<TokenizedText> Embedder::Impl::tokenize_all(const std::vector<std::string>& texts,
                                                        const EmbedCall& call) {
  RLX_CHECK(!cfg_.classifier, "embedder: '" << dir_ << "' is a cross-encoder (" << info_.architecture
                                            << "): it scores text pairs (score()), it gives no embeddings");
  const bool per_call = call.prompt || !call.prompt_name.empty();
  const std::string prompt = per_call ? prompt_for(call.prompt_name, call.prompt)
                                      : prompt_for(opts_.prompt_name, opts_.prompt);
  if (call.truncated) call.truncated->assign(texts.size(), 0);
  std::vector<TokenizedText> encs(texts.size());
  const auto encode = [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      const std::string text = prompt.empty() ? texts[i] : prompt + texts[i];
      encs[i] = tokenizer_->encode(sentence_.strip_texts ? strip_spaces(text) : text, max_len_);
    }
  };
  // Tokenizing is host work the forward waits on: 2000 sentences take ~70
  // ms on one core, more than a GPU's forward of them. Large calls split it
  // over threads (a tokenizer's encode is const and keeps no cache).
  const size_t parts = embed_tokenize_threads(texts.size(), opts_.device, opts_.threads);
  if (parts <= 1) {
    encode(0, texts.size());
  } else {
    std::vector<std::exception_ptr> errors(parts);
    std::vector<std::thread> threads;
    for (size_t p = 0; p < parts; ++p)
      threads.emplace_back([&, p] {
        try {
          encode(texts.size() * p / parts, texts.size() * (p + 1) / parts);
        } catch (...) {
          errors[p] = std::current_exception();
        }
      });
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
  size_t cut = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    RLX_CHECK(opts_.truncate || !encs[i].truncated,
              "embedder: text " << i << " is longer than the model's " << max_len_ << " tokens (truncation is off)");
    cut += encs[i].truncated;
    if (call.truncated) (*call.truncated)[i] = encs[i].truncated;
  }
  truncated_ += cut;
  return encs;
}

std::vector<std::vector<float>> Embedder::Impl::embed(const std::vector<std::string>& texts,
                                                      const EmbedCall& call) {
  const int max_batch = batch_of(call);
  std::lock_guard<std::mutex> lock(mutex_);
  return run_all(tokenize_all(texts, call), max_batch);
}

DeviceEmbeddings Embedder::Impl::embed_on_device(const std::vector<std::string>& texts, const EmbedCall& call,
                                                 bool normalize) {
  const int max_batch = batch_of(call);
  std::lock_guard<std::mutex> lock(mutex_);
  RLX_CHECK(opts_.device != Device::Cpu,
            "embedder: embeddings stay on the device only for a CUDA embedder; '" << dir_ << "' runs on the CPU");
  RLX_CHECK(pools_in_graph() && dense_.empty(),
            "embedder: '" << dir_ << "': embeddings stay on the device only where pooling runs in the graph (mean "
                          << "or cls; a decoder's lasttoken) and no Dense module follows it; this model's are pooled "
                             "or projected on the host");
  const std::vector<TokenizedText> encs = tokenize_all(texts, call);
  DeviceEmbeddings out;
  out.rows = texts.size();
  out.dim = opts_.truncate_dim > 0 ? size_t(opts_.truncate_dim) : size_t(pooled_dim_);
  if (encs.empty()) {
    out.device = -1;
    return out;
  }
  const std::vector<size_t> order = length_order(encs, max_batch);
  for (size_t start = 0; start < order.size(); start += size_t(max_batch)) {
    const size_t end = std::min(order.size(), start + size_t(max_batch));
    std::vector<const TokenizedText*> chunk;
    std::vector<int32_t> dst_rows;
    for (size_t i = start; i < end; ++i) {
      chunk.push_back(&encs[order[i]]);
      dst_rows.push_back(int32_t(order[i]));
    }
    Executable* exe = nullptr;
    Bucket b;
    std::vector<size_t> lengths;
    run_bucket(chunk, max_batch, &exe, &b, &lengths);
    BackendExecutable& be = exe->backend();
    if (!out.data) {
      out.data = be.device_floats(out.rows * out.dim);
      out.device = be.device_index();
      RLX_CHECK(out.data, "embedder: embeddings stay on the device only for a CUDA embedder; '"
                              << dir_ << "' runs on the CPU (" << be.summary() << ")");
    }
    const std::vector<std::string> names = exe->output_names();
    const auto it = std::find(names.begin(), names.end(), "embedding");
    RLX_CHECK(it != names.end(), "embedder: the executable returned no 'embedding'");
    be.export_output_rows(size_t(it - names.begin()), dst_rows, int(out.dim), normalize_ || normalize,
                          out.data.get());
  }
  return out;
}

std::vector<float> Embedder::Impl::score(const std::vector<std::string>& queries,
                                         const std::vector<std::string>& docs, bool activate, const EmbedCall& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string& arch = info_.architecture;
  // A causal LM as published (Qwen3-Reranker) scores only by a recipe the
  // user names: its files do not say how.
  RLX_CHECK(cfg_.classifier || !decoder_ || sentence_.present || !is_causal_lm(arch),
            "embedder: '" << dir_ << "' is a causal LM (" << arch << ") with no sentence-transformers files "
                          << "(modules.json with a LogitScore module), so nothing in it says how to score a pair; "
                          << "for a reranker published as a plain causal LM, name its recipe "
                          << "(EmbedderOptions::reranker_recipe, rlx rerank --recipe: " << reranker_recipe_names()
                          << ")");
  RLX_CHECK(cfg_.classifier, "embedder: '" << dir_ << "' is an embedding model ("
                                           << (arch.empty() ? cfg_.model_type : arch)
                                           << "), not a cross-encoder: it cannot score pairs");
  RLX_CHECK(cfg_.num_labels == 1, "embedder: '" << dir_ << "' has " << cfg_.num_labels
                                                << " labels; scoring needs a model with one");
  std::vector<TokenizedText> encs;
  encs.reserve(docs.size());
  size_t cut = 0;
  // A causal cross-encoder: each pair through the chat template, the prompt
  // (when there is one) as its system message.
  check_pair_prompt(call.prompt_name, call.prompt);
  const bool per_call = call.prompt || !call.prompt_name.empty();
  const std::string prompt = !reranker_ ? ""
                             : per_call ? prompt_for(call.prompt_name, call.prompt)
                                        : prompt_for(opts_.prompt_name, opts_.prompt);
  const int max_batch = batch_of(call);
  if (call.truncated) call.truncated->assign(docs.size(), 0);
  const std::vector<int32_t> suffix = reranker_ ? reranker_->suffix(prompt) : std::vector<int32_t>{};
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string& query = queries[queries.size() == 1 ? 0 : i];
    encs.push_back(reranker_ ? reranker_->encode(query, docs[i], prompt, max_len_, suffix)
                             : tokenizer_->encode_pair(query, docs[i], max_len_));
    RLX_CHECK(opts_.truncate || !encs.back().truncated,
              "embedder: the query with document " << i << " is longer than the model's " << max_len_
                                                   << " tokens (truncation is off)");
    cut += encs.back().truncated;
    if (call.truncated) (*call.truncated)[i] = encs.back().truncated;
  }
  truncated_ += cut;
  std::vector<std::vector<float>> logits = run_all(encs, max_batch);
  std::vector<float> out(docs.size());
  const bool sigmoid = activate && cfg_.score_activation == BertConfig::ScoreActivation::Sigmoid;
  for (size_t i = 0; i < docs.size(); ++i)
    RLX_CHECK(std::isfinite(logits[i][0]), "embedder: '" << dir_ << "' gave a non-finite score (" << logits[i][0]
                                                         << ") for document " << i
                                                         << " (NaN or inf in the weights or the activations)");
  for (size_t i = 0; i < docs.size(); ++i)
    out[i] = sigmoid ? float(1.0 / (1.0 + std::exp(-double(logits[i][0])))) : logits[i][0];
  return out;
}

Embedder::Embedder(const std::string& dir, const EmbedderOptions& opts) : impl_(std::make_unique<Impl>(dir, opts)) {}
Embedder::~Embedder() = default;

std::vector<std::vector<float>> Embedder::embed(const std::vector<std::string>& texts) {
  return impl_->embed(texts, {});
}
std::vector<std::vector<float>> Embedder::embed(const std::vector<std::string>& texts, int max_batch) {
  EmbedCall call;
  call.max_batch = max_batch;
  return embed(texts, call);
}

std::vector<std::vector<float>> Embedder::embed(const std::vector<std::string>& texts, const EmbedCall& call) {
  return impl_->embed(texts, call);
}
DeviceEmbeddings Embedder::embed_on_device(const std::vector<std::string>& texts, const EmbedCall& call,
                                           bool normalize) {
  return impl_->embed_on_device(texts, call, normalize);
}
std::vector<float> Embedder::score(const std::string& query, const std::vector<std::string>& documents) {
  return impl_->score({query}, documents, true, {});
}
std::vector<float> Embedder::logits(const std::string& query, const std::vector<std::string>& documents) {
  return impl_->score({query}, documents, false, {});
}
std::vector<float> Embedder::score(const std::string& query, const std::vector<std::string>& documents,
                                   const EmbedCall& call) {
  return impl_->score({query}, documents, true, call);
}
std::vector<float> Embedder::logits(const std::string& query, const std::vector<std::string>& documents,
                                    const EmbedCall& call) {
  return impl_->score({query}, documents, false, call);
}

namespace {
// Pairs as the queries and documents Impl::score takes.
std::pair<std::vector<std::string>, std::vector<std::string>> split_pairs(
    const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  out.first.reserve(pairs.size());
  out.second.reserve(pairs.size());
  for (const auto& [query, document] : pairs) {
    out.first.push_back(query);
    out.second.push_back(document);
  }
  return out;
}
}  // namespace

std::vector<float> Embedder::score_pairs(const std::vector<std::pair<std::string, std::string>>& pairs,
                                         const EmbedCall& call) {
  auto [queries, documents] = split_pairs(pairs);
  return impl_->score(queries, documents, true, call);
}
std::vector<float> Embedder::logits_pairs(const std::vector<std::pair<std::string, std::string>>& pairs,
                                          const EmbedCall& call) {
  auto [queries, documents] = split_pairs(pairs);
  return impl_->score(queries, documents, false, call);
}
bool Embedder::is_cross_encoder() const { return impl_->cfg_.classifier; }
std::string Embedder::prompt(const std::string& name) const { return impl_->prompt_text(name); }
size_t Embedder::truncated_texts() const { return impl_->truncated_; }
int Embedder::dim() const { return impl_->info_.dim; }
int Embedder::max_len() const { return impl_->max_len_; }
bool Embedder::normalizes() const { return impl_->info_.normalize; }
const EmbeddingTokenizer& Embedder::tokenizer() const { return *impl_->tokenizer_; }
const EmbedderInfo& Embedder::info() const { return impl_->info_; }
size_t Embedder::compiled_buckets() const { return impl_->buckets_->compiled(); }
const std::vector<Bucket>& Embedder::buckets_used() const { return impl_->buckets_->used(); }

}  // namespace rlx
