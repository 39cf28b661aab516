// Executables of one graph builder at several (batch, seq) shape buckets,
// compiled on first use, sharing one arena and one copy of the params. rlx
// compiles static shapes, so a model serves inputs of varying size by
// rounding them up to a few buckets; an embedder and a generator share this
// policy.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlx/embedder.h"  // Bucket
#include "rlx/session.h"

namespace rlx {

// Smallest bucket holding `count` rows of up to `longest` tokens: batch a
// power of two, at most max_batch; seq at least 16 and at most max_seq, a
// multiple of 16 up to 128, then eight steps per doubling (160, 192, ...).
Bucket bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch);

class BucketCache {
 public:
  using Build = std::function<Graph(const Bucket&)>;
  // Sets the params of the first executable compiled on an arena; the
  // others take them with share_params_with.
  using LoadParams = std::function<void(Executable&, const Graph&)>;

  // `options` are used for every bucket (their arena_share is replaced);
  // `what` names the user in errors and RLX_TRACE lines ("embed").
  BucketCache(std::string what, Build build, LoadParams load_params, CompileOptions options);

  // Makes the arena large enough for every bucket up to `largest` (and up to
  // what it already held). The arena is sized for what callers ask, not for
  // the largest possible bucket: a growth replaces it, which drops the
  // compiled executables (they hold the old arena) and loads the params
  // again at the next get(). References from get() die with it.
  void reserve(const Bucket& largest);
  // The executable of bucket b, compiled on first use; b must fit reserve().
  Executable& get(const Bucket& b);

  size_t compiled() const { return exes_.size(); }
  const std::vector<Bucket>& used() const { return used_; }  // every get(), in order
  Bucket arena_for() const { return arena_for_; }            // the bucket the arena was sized for
  uint64_t arena_bytes() const;                              // 0 before the first reserve()
  int params_loaded() const { return loads_; }               // LoadParams calls so far

 private:
  std::string what_;
  Build build_;
  LoadParams load_params_;
  CompileOptions options_;
  std::shared_ptr<ArenaShare> share_;  // one arena for every bucket
  Bucket arena_for_;
  std::map<Bucket, std::unique_ptr<Executable>> exes_;
  std::vector<Bucket> used_;
  int loads_ = 0;
};

}  // namespace rlx
