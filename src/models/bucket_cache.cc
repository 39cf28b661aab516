#include "models/bucket_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rlx {
namespace {

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

Bucket bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch) {
  RLX_CHECK(count >= 1 && longest >= 1, "buckets: empty bucket request");
  RLX_CHECK(longest <= max_seq, "buckets: " << longest << " tokens exceed the limit " << max_seq);
  return {std::min(next_pow2(count), max_batch), std::min(std::max<int64_t>(16, next_pow2(longest)), max_seq)};
}

BucketCache::BucketCache(Build build, LoadParams load_params, Bucket largest, CompileOptions options)
    : build_(std::move(build)), load_params_(std::move(load_params)), largest_(largest), options_(std::move(options)) {}

Executable& BucketCache::get(const Bucket& b) {
  auto it = exes_.find(b);
  const bool fresh = it == exes_.end();
  if (fresh) {
    if (!share_) {  // every bucket uses one arena, sized for the largest
      CompileOptions plan = options_;
      plan.arena_share = nullptr;
      share_ = make_arena_share(planned_arena_bytes(build_(largest_), plan));
    }
    Graph g = build_(b);
    CompileOptions co = options_;
    co.arena_share = share_;
    auto exe = compile(g, co);
    if (exes_.empty()) load_params_(*exe, g);  // the params live in the shared arena
    else exe->share_params_with(*exes_.begin()->second);
    it = exes_.emplace(b, std::move(exe)).first;
  }
  if (std::getenv("RLX_TRACE"))
    std::fprintf(stderr, "rlx embed: bucket batch=%lld seq=%lld (%s)\n", (long long)b.batch, (long long)b.seq,
                 fresh ? "compiled" : "cached");
  used_.push_back(b);
  return *it->second;
}

}  // namespace rlx
