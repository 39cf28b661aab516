#include "models/embedder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <numeric>

#include "models/bert.h"
#include "models/bucket_cache.h"
#include "models/hf_config.h"
#include "rlx/error.h"
#include "tokenizers/wordpiece.h"

namespace rlx {

// Everything the embedder holds: the public header (rlx/embedder.h) shows
// none of the internal types.
struct Embedder::Impl {
  Impl(const std::string& dir, const EmbedderOptions& opts);
  void run_chunk(const std::vector<const Encoding*>& encs, std::vector<std::vector<float>*>& outs, int max_batch);
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts, int max_batch);

  BertConfig cfg_;
  SentenceConfig sentence_;
  WordPiece tokenizer_;
  BertWeights weights_;
  EmbedderOptions opts_;
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

namespace {
void check_max_batch(int max_batch) {
  RLX_CHECK(max_batch >= 1 && max_batch <= EmbedderOptions::kMaxBatch && (max_batch & (max_batch - 1)) == 0,
            "embedder: max_batch " << max_batch << " must be a power of two in [1, " << EmbedderOptions::kMaxBatch
                                   << "]");
}
}  // namespace

Bucket Embedder::bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch) {
  return rlx::bucket_for(count, longest, max_seq, max_batch);
}

Embedder::Impl::Impl(const std::string& dir, const EmbedderOptions& opts)
    : cfg_(load_bert_config(dir)),
      sentence_(load_sentence_config(dir)),
      tokenizer_(WordPiece::from_dir(dir)),
      weights_((std::filesystem::path(dir) / "model.safetensors").string()),
      opts_(opts) {
  check_max_batch(opts_.max_batch);
  RLX_CHECK(tokenizer_.max_id() < cfg_.vocab_size,
            "embedder: '" << dir << "': the tokenizer gives ids up to " << tokenizer_.max_id()
                          << " but config.json's vocab_size is " << cfg_.vocab_size);
  max_len_ = cfg_.max_position_embeddings;
  if (sentence_.max_seq_length > 0) max_len_ = std::min(max_len_, sentence_.max_seq_length);
  if (opts_.max_len > 0) max_len_ = std::min(max_len_, opts_.max_len);
  // Fail on missing or misshapen weights now, not at the first bucket.
  weights_.check_sizes(cfg_);
  weights_.validate(build_bert_graph(cfg_, sentence_.pooling, 1, 2, opts_.dtype));
  CompileOptions co;
  co.device = opts_.device;
  co.threads = opts_.threads;
  buckets_ = std::make_unique<BucketCache>(
      "embed",
      [this](const Bucket& b) { return build_bert_graph(cfg_, sentence_.pooling, b.batch, b.seq, opts_.dtype); },
      [this](Executable& exe, const Graph& g) { weights_.load_into(exe, g); }, co);
}

void Embedder::Impl::run_chunk(const std::vector<const Encoding*>& encs,
                         std::vector<std::vector<float>*>& outs, int max_batch) {
  int64_t longest = 0;
  for (const Encoding* e : encs) longest = std::max<int64_t>(longest, int64_t(e->size()));
  Bucket b = bucket_for(int64_t(encs.size()), longest, max_len_, max_batch);
  Executable& exe = buckets_->get(b);
  const size_t S = size_t(b.seq);
  std::vector<int32_t> ids(size_t(b.batch) * S, 0), mask(ids.size(), 0), types(ids.size(), 0);
  for (size_t r = 0; r < size_t(b.batch); ++r) {
    if (r < encs.size()) {
      const Encoding& e = *encs[r];
      std::copy(e.ids.begin(), e.ids.end(), ids.begin() + long(r * S));
      std::copy(e.attention_mask.begin(), e.attention_mask.end(), mask.begin() + long(r * S));
      std::copy(e.type_ids.begin(), e.type_ids.end(), types.begin() + long(r * S));
    } else {
      // Filler rows keep one token so no row is fully masked; their results are dropped.
      ids[r * S] = encs[0]->ids[0];
      mask[r * S] = 1;
    }
  }
  Shape shape{b.batch, b.seq};
  auto result = exe.run({{"input_ids", HostTensor::from_i32(shape, ids)},
                         {"attention_mask", HostTensor::from_i32(shape, mask)},
                         {"token_type_ids", HostTensor::from_i32(shape, types)}});
  auto it = result.find("embedding");
  RLX_CHECK(it != result.end(), "embedder: the executable returned no 'embedding'");
  std::vector<float> all = it->second.to_f32();
  const size_t H = size_t(cfg_.hidden_size);
  RLX_CHECK(all.size() == size_t(b.batch) * H, "embedder: embedding has " << all.size()
                                                   << " values, expected " << b.batch * H);
  for (size_t r = 0; r < encs.size(); ++r) {
    outs[r]->assign(all.begin() + long(r * H), all.begin() + long((r + 1) * H));
    if (sentence_.normalize) l2_normalize(*outs[r]);
  }
}

std::vector<std::vector<float>> Embedder::Impl::embed(const std::vector<std::string>& texts, int max_batch) {
  check_max_batch(max_batch);
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::vector<float>> out(texts.size());
  if (texts.empty()) return out;
  std::vector<Encoding> encs;
  encs.reserve(texts.size());
  size_t cut = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    encs.push_back(tokenizer_.encode(texts[i], max_len_));
    RLX_CHECK(opts_.truncate || !encs.back().truncated,
              "embedder: text " << i << " is longer than the model's " << max_len_
                                << " tokens (truncation is off)");
    cut += encs.back().truncated;
  }
  truncated_ += cut;
  // Similar lengths share a chunk, so padding stays small.
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return encs[a].size() < encs[b].size(); });
  Bucket largest;
  for (size_t start = 0; start < order.size(); start += size_t(max_batch)) {
    size_t end = std::min(order.size(), start + size_t(max_batch));
    Bucket b = bucket_for(int64_t(end - start), int64_t(encs[order[end - 1]].size()), max_len_, max_batch);
    largest = {std::max(largest.batch, b.batch), std::max(largest.seq, b.seq)};
  }
  // The arena is sized for the largest bucket this input needs, not for the
  // largest possible one: one short sentence must not reserve max_batch x
  // max_len. A larger input later replaces the arena (and recompiles).
  buckets_->reserve(largest);
  for (size_t start = 0; start < order.size(); start += size_t(max_batch)) {
    size_t end = std::min(order.size(), start + size_t(max_batch));
    std::vector<const Encoding*> chunk;
    std::vector<std::vector<float>*> dst;
    for (size_t i = start; i < end; ++i) {
      chunk.push_back(&encs[order[i]]);
      dst.push_back(&out[order[i]]);
    }
    run_chunk(chunk, dst, max_batch);
  }
  return out;
}

Embedder::Embedder(const std::string& dir, const EmbedderOptions& opts) : impl_(std::make_unique<Impl>(dir, opts)) {}
Embedder::~Embedder() = default;

std::vector<std::vector<float>> Embedder::embed(const std::vector<std::string>& texts) {
  return impl_->embed(texts, impl_->opts_.max_batch);
}
std::vector<std::vector<float>> Embedder::embed(const std::vector<std::string>& texts, int max_batch) {
  return impl_->embed(texts, max_batch);
}
size_t Embedder::truncated_texts() const { return impl_->truncated_; }
int Embedder::dim() const { return impl_->cfg_.hidden_size; }
int Embedder::max_len() const { return impl_->max_len_; }
bool Embedder::normalizes() const { return impl_->sentence_.normalize; }
const WordPiece& Embedder::tokenizer() const { return impl_->tokenizer_; }
const BertConfig& Embedder::config() const { return impl_->cfg_; }
size_t Embedder::compiled_buckets() const { return impl_->buckets_->compiled(); }
const std::vector<Bucket>& Embedder::buckets_used() const { return impl_->buckets_->used(); }

}  // namespace rlx
