// Sentence embeddings from a Hugging Face BERT-family directory: tokenizer +
// model, one compiled executable per (batch, seq) bucket, built on first use.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "models/bert.h"
#include "models/hf_config.h"
#include "rlx/session.h"
#include "tokenizers/wordpiece.h"

namespace rlx {

struct EmbedderOptions {
  DType dtype = DType::F32;
  Device device = Device::Cpu;
  int max_batch = 32;  // a power of two, at most kMaxBatch; larger inputs are chunked
  int max_len = 0;     // tokens per text incl. [CLS]/[SEP]; 0 = the model's own limit
  bool truncate = true;  // false: a text longer than max_len is an error, not cut
  static constexpr int kMaxBatch = 1024;
  int threads = 0;     // CPU threads, 0 = physical cores
};

struct Bucket {
  int64_t batch = 0, seq = 0;
  auto operator<=>(const Bucket&) const = default;
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

  // One embedding per text, in order; L2-normalized when the model's
  // modules.json ends in a Normalize module. A text longer than max_len()
  // tokens is cut (counted in truncated_texts()), or an error when
  // EmbedderOptions::truncate is false.
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts);
  size_t truncated_texts() const { return truncated_; }  // texts cut so far

  int dim() const { return cfg_.hidden_size; }
  int max_len() const { return max_len_; }
  bool normalizes() const { return sentence_.normalize; }
  const WordPiece& tokenizer() const { return tokenizer_; }
  const BertConfig& config() const { return cfg_; }
  size_t compiled_buckets() const { return exes_.size(); }
  const std::vector<Bucket>& buckets_used() const { return used_; }

  // Smallest bucket holding `count` texts of up to `longest` tokens: powers
  // of two, seq at least 16 and at most max_seq, batch at most max_batch.
  static Bucket bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch);

 private:
  Executable& executable(const Bucket& b);
  void reserve_arena(const Bucket& largest);
  void run_chunk(const std::vector<const Encoding*>& encs, std::vector<std::vector<float>*>& outs);

  BertConfig cfg_;
  SentenceConfig sentence_;
  WordPiece tokenizer_;
  BertWeights weights_;
  EmbedderOptions opts_;
  int max_len_ = 512;
  std::shared_ptr<ArenaShare> share_;  // one arena for every bucket
  Bucket arena_for_;                   // the bucket shape the arena was sized for
  std::map<Bucket, std::unique_ptr<Executable>> exes_;
  std::vector<Bucket> used_;
  size_t truncated_ = 0;
  std::mutex mutex_;  // one embed() at a time: the buckets share one arena
};

void l2_normalize(std::vector<float>& v);

}  // namespace rlx
