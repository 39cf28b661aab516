#include "models/bucket_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backends/backend.h"  // ArenaShare::bytes
#include "rlx/error.h"

namespace rlx {
namespace {

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Steps of 16 up to 128, then eight steps per doubling (160, 192, ..., 256,
// 320, ...): a chunk of texts sorted by length pads by less than one step
// (under a quarter of its longest) instead of up to twice it, for about
// three times the buckets of powers of two (16 up to 512 tokens).
int64_t seq_bucket(int64_t longest) {
  const int64_t step = std::max<int64_t>(16, next_pow2(longest) / 8);
  return std::max<int64_t>(16, (longest + step - 1) / step * step);
}

}  // namespace

Bucket bucket_for(int64_t count, int64_t longest, int64_t max_seq, int64_t max_batch) {
  RLX_CHECK(count >= 1 && longest >= 1, "buckets: empty bucket request");
  RLX_CHECK(longest <= max_seq, "buckets: " << longest << " tokens exceed the limit " << max_seq);
  return {std::min(next_pow2(count), max_batch), std::min(seq_bucket(longest), max_seq)};
}

BucketCache::BucketCache(std::string what, Build build, LoadParams load_params, CompileOptions options)
    : what_(std::move(what)), build_(std::move(build)), load_params_(std::move(load_params)),
      options_(std::move(options)) {
  options_.arena_share = nullptr;
}

uint64_t BucketCache::arena_bytes() const { return share_ ? share_->bytes() : 0; }

void BucketCache::reserve(const Bucket& largest) {
  if (share_ && largest.batch <= arena_for_.batch && largest.seq <= arena_for_.seq) return;
  Bucket want{std::max(largest.batch, arena_for_.batch), std::max(largest.seq, arena_for_.seq)};
  uint64_t need = planned_arena_bytes(build_(want), options_);
  exes_.clear();  // they hold the old arena
  share_ = make_arena_share(need);
  arena_for_ = want;
}

Executable& BucketCache::get(const Bucket& b) {
  RLX_CHECK(share_ && b.batch <= arena_for_.batch && b.seq <= arena_for_.seq,
            what_ << ": bucket " << b.batch << "x" << b.seq << " is larger than the arena's ("
                  << arena_for_.batch << "x" << arena_for_.seq << ")");
  auto it = exes_.find(b);
  const bool fresh = it == exes_.end();
  if (fresh) {
    Graph g = build_(b);
    CompileOptions co = options_;
    co.arena_share = share_;
    auto exe = compile(g, co);
    if (exes_.empty()) {  // the params live in the shared arena
      load_params_(*exe, g);
      ++loads_;
    } else {
      exe->share_params_with(*exes_.begin()->second);
    }
    it = exes_.emplace(b, std::move(exe)).first;
  }
  if (std::getenv("RLX_TRACE"))
    std::fprintf(stderr, "rlx %s: bucket batch=%lld seq=%lld (%s)\n", what_.c_str(), (long long)b.batch,
                 (long long)b.seq, fresh ? "compiled" : "cached");
  used_.push_back(b);
  return *it->second;
}

}  // namespace rlx
