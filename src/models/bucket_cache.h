// Executables of one graph builder at several (batch, seq) shape buckets,
// compiled on first use, sharing one arena sized for the largest bucket and
// one copy of the params. The policy an embedder and a generator share:
// rlx compiles static shapes, so a model serves varying inputs by rounding
// them up to a few buckets.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "rlx/embedder.h"  // Bucket
#include "rlx/session.h"

namespace rlx {

// Smallest bucket holding `count` rows of up to `longest` tokens: powers of
// two, seq at least 16 and at most max_seq, batch at most max_batch.
Bucket bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch);

class BucketCache {
 public:
  using Build = std::function<Graph(const Bucket&)>;
  // Sets the params of the first executable compiled (the others share them).
  using LoadParams = std::function<void(Executable&, const Graph&)>;

  // `largest` sizes the shared arena; `options` are used for every bucket.
  BucketCache(Build build, LoadParams load_params, Bucket largest, CompileOptions options);

  Executable& get(const Bucket& b);  // compiles b on first use
  size_t compiled() const { return exes_.size(); }
  const std::vector<Bucket>& used() const { return used_; }

 private:
  Build build_;
  LoadParams load_params_;
  Bucket largest_;
  CompileOptions options_;
  std::shared_ptr<ArenaShare> share_;
  std::map<Bucket, std::unique_ptr<Executable>> exes_;
  std::vector<Bucket> used_;
};

}  // namespace rlx
