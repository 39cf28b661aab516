#include "engine/pool_runner.h"

#include <algorithm>

#include "backends/backend.h"
#include "models/logit_check.h"
#include "rlx/error.h"

namespace rlx {
namespace {

constexpr int64_t kMinPrefillBucket = 16;

int64_t pow2_at_least(int64_t n) {
  int64_t b = 1;
  while (b < n) b *= 2;
  return b;
}

// Decode buckets are the powers of two below the slot count and the count itself.
bool is_decode_bucket(int64_t b, int sequences) { return b == sequences || (b < sequences && (b & (b - 1)) == 0); }

}  // namespace

PoolRunner::PoolRunner(const LlamaWeights& weights, const QuantizedWeights& quantized, const PoolRunnerOptions& o)
    : weights_(weights), quantized_(quantized), cfg_(weights.config()), o_(o) {
  RLX_CHECK(o_.sequences >= 1 && o_.sequences <= 1024, "engine: max_sequences " << o_.sequences << " is outside 1..1024");
  RLX_CHECK(o_.cache_len >= 1 && o_.cache_len <= cfg_.max_positions,
            "engine: a context of " << o_.cache_len << " tokens (the model's context length is " << cfg_.max_positions
                                    << ")");
  RLX_CHECK(o_.prefill_chunk >= 1, "engine: prefill_chunk must be positive");
  o_.prefill_chunk = std::min(pow2_at_least(o_.prefill_chunk), pow2_at_least(o_.cache_len));
  // A bucket larger than the batch needs a slot for its padding rows.
  bool padded = false;
  for (int64_t n = 1; n <= o_.sequences; ++n) padded = padded || !is_decode_bucket(n, o_.sequences);
  pool_slots_ = o_.sequences + (padded ? 1 : 0);
  co_.device = o_.device;
  co_.threads = o_.threads;
  co_.mode = o_.mode;
  // The arena is sized once for the largest graph; every other one fits in it.
  const int64_t chunk = std::min(o_.prefill_chunk, o_.cache_len);
  const uint64_t need = std::max(planned_arena_bytes(graph(1, chunk, true), co_),
                                 planned_arena_bytes(graph(decode_bucket(o_.sequences), 1, true), co_));
  co_.arena_share = make_arena_share(need);
}

PoolRunner::~PoolRunner() = default;

Graph PoolRunner::graph(int64_t batch, int64_t seq, bool logits) const {
  // Runs take at most prefill_chunk tokens: window layers' rings are sized by it.
  return build_llama_graph(cfg_, batch, seq, o_.dtype, o_.cache_len, LlamaFeed::Inputs, {}, quantized_,
                           LlamaPool{pool_slots_, logits}, o_.prefill_chunk);
}

Executable& PoolRunner::executable(int64_t batch, int64_t seq, bool logits) {
  auto key = std::make_tuple(batch, seq, logits);
  auto it = exes_.find(key);
  if (it != exes_.end()) return *it->second;
  Graph g = graph(batch, seq, logits);
  auto exe = compile(g, co_);
  if (with_params_) {
    exe->share_params_with(*with_params_);
  } else {
    weights_.validate(g);
    weights_.load_into(*exe, g);
    with_params_ = exe.get();
  }
  return *exes_.emplace(key, std::move(exe)).first->second;
}

void PoolRunner::prepare() {
  for (int64_t b = kMinPrefillBucket;; b *= 2) {
    const int64_t seq = std::min(b, o_.prefill_chunk);
    if (seq > o_.cache_len) break;
    executable(1, seq, false);
    executable(1, seq, true);
    if (seq == o_.prefill_chunk) break;
  }
  for (int64_t b = 1;; b *= 2) {
    executable(std::min<int64_t>(b, o_.sequences), 1, false);
    if (b >= o_.sequences) break;
  }
}

int64_t PoolRunner::decode_bucket(int64_t rows) const {
  int64_t b = 1;
  while (b < rows) b *= 2;
  return std::min<int64_t>(b, o_.sequences);
}

Executable& PoolRunner::decode_executable(int64_t batch, bool logits) {
  return executable(decode_bucket(batch), 1, logits);
}

int64_t PoolRunner::prefill_take(int64_t start, int64_t n) const {
  RLX_CHECK(start >= 0 && start < o_.cache_len && n >= 1,
            "engine: prefill of " << n << " tokens at " << start << " in a context of " << o_.cache_len);
  int64_t b = std::max(kMinPrefillBucket, pow2_at_least(std::min(n, o_.prefill_chunk)));
  b = std::min(b, o_.prefill_chunk);
  // The bucket's rows (padding included) must lie inside the slot.
  while (start + b > o_.cache_len) b /= 2;
  return std::min(n, b);
}

PoolRunner::Choice PoolRunner::prefill(int slot, const std::vector<int32_t>& tokens, int64_t start, bool logits) {
  const int64_t n = int64_t(tokens.size());
  RLX_CHECK(slot >= 0 && slot < o_.sequences, "engine: slot " << slot << " is outside the pool");
  RLX_CHECK(n >= 1 && prefill_take(start, n) == n, "engine: " << n << " tokens at " << start
                                                               << " do not fit one prefill run");
  int64_t b = std::max(kMinPrefillBucket, pow2_at_least(n));
  b = std::min(b, o_.prefill_chunk);
  while (start + b > o_.cache_len) b /= 2;
  Executable& exe = executable(1, b, logits);
  std::vector<int32_t> padded(tokens);
  padded.resize(size_t(b), 0);  // after the last token: rows masked by causality, overwritten later
  auto out = exe.run({{"input_ids", HostTensor::from_i32({1, b}, padded)},
                      {"pos", HostTensor::from_i32({1}, {int32_t(start)})},
                      {"slot", HostTensor::from_i32({1}, {slot})},
                      {"last_index", HostTensor::from_i32({1}, {int32_t(n - 1)})}});
  ++prefill_runs_;
  check_logits_finite(out, 1, "the prefill of slot " + std::to_string(slot) + " at position " + std::to_string(start));
  Choice c;
  c.argmax = out.at("next_token").to_i32().at(0);
  if (logits) c.logits = out.at("logits").to_f32();
  return c;
}

std::vector<PoolRunner::Choice> PoolRunner::decode(const std::vector<DecodeRow>& rows, bool logits) {
  const int64_t n = int64_t(rows.size());
  RLX_CHECK(n >= 1 && n <= o_.sequences, "engine: a decode step of " << n << " rows (" << o_.sequences << " slots)");
  const int64_t b = decode_bucket(n);
  std::vector<int32_t> ids(size_t(b), 0), pos(size_t(b), 0), slots(size_t(b), int32_t(o_.sequences)), last(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) last[size_t(i)] = int32_t(i);
  for (int64_t i = 0; i < n; ++i) {
    const DecodeRow& r = rows[size_t(i)];
    RLX_CHECK(r.slot >= 0 && r.slot < o_.sequences && r.pos >= 0 && r.pos < o_.cache_len,
              "engine: decode row " << i << " (slot " << r.slot << ", position " << r.pos << ") is outside the pool");
    ids[size_t(i)] = r.token;
    pos[size_t(i)] = int32_t(r.pos);
    slots[size_t(i)] = r.slot;
  }
  Executable& exe = executable(b, 1, logits);
  auto out = exe.run({{"input_ids", HostTensor::from_i32({b, 1}, ids)},
                      {"pos", HostTensor::from_i32({b}, pos)},
                      {"slot", HostTensor::from_i32({b}, slots)},
                      {"last_index", HostTensor::from_i32({b}, last)}});
  ++decode_runs_;
  check_logits_finite(out, n, "a decode step of " + std::to_string(n) + " rows");
  const std::vector<int32_t> chosen = out.at("next_token").to_i32();
  std::vector<float> all = logits ? out.at("logits").to_f32() : std::vector<float>();
  std::vector<Choice> result(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    result[size_t(i)].argmax = chosen[size_t(i)];
    if (logits)
      result[size_t(i)].logits.assign(all.begin() + i * cfg_.chosen_vocab(), all.begin() + (i + 1) * cfg_.chosen_vocab());
  }
  return result;
}

uint64_t PoolRunner::kv_pool_bytes() const {
  const int64_t kv_dim = int64_t(cfg_.num_kv_heads) * cfg_.head_dim;
  uint64_t rows = 0;
  for (int l = 0; l < cfg_.num_layers; ++l) rows += uint64_t(llama_kv_rows(cfg_, l, o_.cache_len, o_.prefill_chunk));
  return rows * uint64_t(pool_slots_) * uint64_t(2 * kv_dim) * dtype_size(o_.dtype);
}

bool PoolRunner::window_rings() const { return llama_kv_ring(cfg_, o_.cache_len, o_.prefill_chunk); }

uint64_t PoolRunner::arena_bytes() const { return co_.arena_share->bytes(); }

uint64_t PoolRunner::weight_bytes() const {
  return with_params_ ? with_params_->schedule().params.size : 0;
}

std::string PoolRunner::backend_summary() { return decode_executable(1, false).backend_summary(); }

}  // namespace rlx
