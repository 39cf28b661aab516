// Sentence embeddings from a Hugging Face BERT-family directory (config.json,
// tokenizer files, model.safetensors, sentence-transformers modules): the
// tokenizer and the model, compiled per (batch, seq) bucket on first use.
#pragma once
#include <compare>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rlx/options.h"
#include "rlx/dtype.h"

namespace rlx {

class WordPiece;
struct BertConfig;

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
  ~Embedder();

  // One embedding per text, in order; L2-normalized when the model's
  // modules.json ends in a Normalize module. A text longer than max_len()
  // tokens is cut (counted in truncated_texts()), or an error when
  // EmbedderOptions::truncate is false.
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts);
  // The same with at most max_batch texts per run (a power of two in
  // [1, kMaxBatch]) in place of EmbedderOptions::max_batch.
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts, int max_batch);
  size_t truncated_texts() const;  // texts cut so far

  int dim() const;
  int max_len() const;
  bool normalizes() const;
  const WordPiece& tokenizer() const;  // full type: tokenizers/wordpiece.h (in-tree)
  const BertConfig& config() const;    // full type: models/hf_config.h (in-tree)
  size_t compiled_buckets() const;
  const std::vector<Bucket>& buckets_used() const;

  // Smallest bucket holding `count` texts of up to `longest` tokens: powers
  // of two, seq at least 16 and at most max_seq, batch at most max_batch.
  static Bucket bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

void l2_normalize(std::vector<float>& v);

}  // namespace rlx
