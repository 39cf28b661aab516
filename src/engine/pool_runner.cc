#include "engine/pool_runner.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/backend.h"
#include "models/llama_shard.h"
#include "models/logit_check.h"
#include "rlx/error.h"
#include "runtime/collective.h"

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
  const int tp = o_.tensor_parallel;
  RLX_CHECK(tp >= 1 && tp <= 64, "engine: tensor_parallel " << tp << " is outside 1..64");
  // Named devices make a group even of one rank (the collective path at TP=1).
  const bool grouped = tp > 1 || (o_.device == Device::Cuda && !o_.devices.empty());
  const LlamaConfig rank_cfg = grouped ? llama_rank_config(cfg_, tp, quantized_) : cfg_;
  std::vector<int> devices = o_.devices;
  if (o_.device == Device::Cuda && devices.empty())
    for (int r = 0; r < tp; ++r) devices.push_back(o_.device_index + r);
  RLX_CHECK(o_.device != Device::Cuda || int(devices.size()) == tp,
            "engine: " << tp << " tensor-parallel ranks on " << devices.size() << " GPUs");
  if (grouped) group_ = make_collective(o_.device, tp, o_.device == Device::Cuda ? devices : std::vector<int>{});
  if (tp > 1) threads_ = std::make_unique<RankThreads>(tp);
  const int threads = o_.threads > 0 ? std::max(1, o_.threads / tp) : (tp > 1 ? 1 : 0);
  const int64_t chunk = std::min(o_.prefill_chunk, o_.cache_len);
  ranks_.resize(size_t(tp));
  for (int r = 0; r < tp; ++r) {
    Rank& k = ranks_[size_t(r)];
    k.cfg = rank_cfg;
    k.co.device = o_.device;
    k.co.threads = threads;
    k.co.mode = o_.mode;
    k.co.device_index = o_.device == Device::Cuda ? devices[size_t(r)] : 0;
    k.co.collective = group_;
    k.co.rank = r;
    // The arena is sized once for the largest graph; every other one fits in it.
    const uint64_t need = std::max(planned_arena_bytes(graph(k.cfg, 1, chunk, true), k.co),
                                   planned_arena_bytes(graph(k.cfg, decode_bucket(o_.sequences), 1, true), k.co));
    k.co.arena_share = make_arena_share(need);
  }
}

PoolRunner::~PoolRunner() = default;

Graph PoolRunner::graph(const LlamaConfig& c, int64_t batch, int64_t seq, bool logits) const {
  // Runs take at most prefill_chunk tokens: window layers' rings are sized by it.
  return build_llama_graph(c, batch, seq, o_.dtype, o_.cache_len, LlamaFeed::Inputs, {}, quantized_,
                           LlamaPool{pool_slots_, logits}, o_.prefill_chunk);
}

Executable& PoolRunner::executable(int64_t batch, int64_t seq, bool logits) {
  const Key key{batch, seq, logits};
  auto it = ranks_[0].exes.find(key);
  if (it != ranks_[0].exes.end()) return *it->second;
  const int tp = int(ranks_.size());
  // Every rank at once, each on its own thread: a rank's loads and graph
  // recording then never wait on another's.
  auto make = [&](int r) {
    Rank& k = ranks_[size_t(r)];
    Graph g = graph(k.cfg, batch, seq, logits);
    CompileOptions co = k.co;
    // RLX_TRACE_JSON=prefix (CUDA, for measuring): rank 0's graph of each
    // shape writes its per-thunk GPU times to prefix-b<batch>-s<seq>.json
    // after its first run.
    if (const char* t = std::getenv("RLX_TRACE_JSON"); t && *t && r == 0)
      co.trace_json = std::string(t) + "-b" + std::to_string(batch) + "-s" + std::to_string(seq) + ".json";
    auto exe = compile(g, co);
    if (k.with_params) {
      exe->share_params_with(*k.with_params);
    } else {
      const TpRank rank{r, tp};
      weights_.validate(g, rank);
      weights_.load_into(*exe, g, rank);
      k.with_params = exe.get();
    }
    k.exes.emplace(key, std::move(exe));
  };
  if (threads_) threads_->run(make);
  else make(0);
  return *ranks_[0].exes.at(key);
}

std::map<std::string, HostTensor> PoolRunner::run(int64_t batch, int64_t seq, bool logits,
                                                  const std::map<std::string, HostTensor>& inputs) {
  Executable& first = executable(batch, seq, logits);
  if (ranks_.size() == 1) return first.run(inputs);
  const Key key{batch, seq, logits};
  std::map<std::string, HostTensor> out;
  threads_->run(
      [&](int r) {
        auto o = ranks_[size_t(r)].exes.at(key)->run(inputs);
        if (r == 0) out = std::move(o);
      },
      [&](const std::string& why) { group_->abort(why); });
  return out;
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

Executable& PoolRunner::decode_executable(int64_t batch, bool logits, int rank) {
  RLX_CHECK(rank >= 0 && rank < int(ranks_.size()), "engine: rank " << rank << " of " << ranks_.size());
  const int64_t b = decode_bucket(batch);
  executable(b, 1, logits);
  return *ranks_[size_t(rank)].exes.at(Key{b, 1, logits});
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
  std::vector<int32_t> padded(tokens);
  padded.resize(size_t(b), 0);  // after the last token: rows masked by causality, overwritten later
  auto out = run(1, b, logits,
                 {{"input_ids", HostTensor::from_i32({1, b}, padded)},
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
  auto out = run(b, 1, logits,
                 {{"input_ids", HostTensor::from_i32({b, 1}, ids)},
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

// Over all ranks (each holds its KV heads' share, or a shared KV head).
uint64_t PoolRunner::kv_pool_bytes() const {
  const LlamaConfig& c = ranks_[0].cfg;
  const int64_t kv_dim = int64_t(c.num_kv_heads) * c.head_dim;
  uint64_t rows = 0;
  for (int l = 0; l < c.num_layers; ++l) rows += uint64_t(llama_kv_rows(c, l, o_.cache_len, o_.prefill_chunk));
  return rows * uint64_t(pool_slots_) * uint64_t(2 * kv_dim) * dtype_size(o_.dtype) * uint64_t(ranks_.size());
}

bool PoolRunner::window_rings() const { return llama_kv_ring(cfg_, o_.cache_len, o_.prefill_chunk); }

uint64_t PoolRunner::arena_bytes() const {
  uint64_t n = 0;
  for (const Rank& k : ranks_) n += k.co.arena_share->bytes();
  return n;
}

uint64_t PoolRunner::weight_bytes() const {
  uint64_t n = 0;
  for (const Rank& k : ranks_) n += k.with_params ? k.with_params->schedule().params.size : 0;
  return n;
}

std::string PoolRunner::backend_summary() { return decode_executable(1, false).backend_summary(); }

}  // namespace rlx
