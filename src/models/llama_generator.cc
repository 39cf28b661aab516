#include "models/llama_generator.h"

#include <algorithm>

#include "models/llama_model_files.h"
#include "models/logit_check.h"
#include "models/sampling.h"
#include "rlx/error.h"
#include "rlx/session.h"

namespace rlx {
namespace {

constexpr int64_t kMinBucket = 16;

}  // namespace

int64_t llama_length_bucket(int64_t n, int64_t max_positions) {
  int64_t b = kMinBucket;
  while (b < n) b *= 2;
  return std::min<int64_t>(b, max_positions);
}

LlamaGenerator::LlamaGenerator(const std::string& path, GeneratorOptions o) : o_(o), sampler_(o.sampling) {
  LlamaModelFiles m = open_llama_model(path);
  model_ = std::move(m.weights);
  tokenizer_ = std::move(m.tokenizer);
  eos_id_ = m.eos_id;
  chat_template_ = std::move(m.chat_template);
  quantized_ = plan_llama_quantization(
      config(), [&](const std::string& t) { return model_->stored_quant(t); }, o_.quantize,
      o_.device == Device::Auto ? (cuda_available() ? Device::Cuda : Device::Cpu) : o_.device);
}

LlamaGenerator::~LlamaGenerator() = default;

const TextTokenizer& LlamaGenerator::tokenizer() const {
  RLX_CHECK(tokenizer_, "llama: this model has no tokenizer (no tokenizer.json): give token ids");
  return *tokenizer_;
}

int64_t LlamaGenerator::bucket_for(int64_t n) const { return llama_length_bucket(n, config().max_positions); }

void LlamaGenerator::reserve(int64_t max_tokens) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  RLX_CHECK(exes_.empty(), "llama: reserve() must come before the first forward pass");
  RLX_CHECK(max_tokens > 0 && max_tokens <= config().max_positions,
            "llama: " << max_tokens << " tokens exceed the context length " << config().max_positions);
  max_tokens_ = max_tokens;
}

void LlamaGenerator::prepare() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  executable(bucket_for(1));  // sizes the arena and decides window_run_
  const int64_t last = window_run_ ? window_run_ : bucket_for(max_tokens_ ? max_tokens_ : config().max_positions);
  for (int64_t b = bucket_for(1);; b = std::min(bucket_for(b * 2), last)) {
    executable(b);
    if (b == last) break;
  }
  if (o_.kv_cache) {
    decode_executable();
    state_fed_executable();
  }
}

std::vector<int64_t> LlamaGenerator::buckets() const {
  std::vector<int64_t> out;
  for (auto& [b, e] : exes_) out.push_back(b);
  return out;
}

std::unique_ptr<Executable> LlamaGenerator::compile_graph(int64_t seq, LlamaFeed feed) {
  CompileOptions co;
  co.device = o_.device;
  co.device_index = o_.device_index;
  co.threads = o_.threads;
  co.mode = o_.mode;
  if (!share_) {
    // The largest bucket sizes the arena all graphs share; its length is the
    // cache's. Window layers keep rings where that pays: then runs take at
    // most window_run_ tokens.
    const int64_t largest = bucket_for(max_tokens_ ? max_tokens_ : config().max_positions);
    cache_len_ = o_.kv_cache ? largest : 0;
    const int64_t run = bucket_for(std::max<int64_t>(1, o_.prefill_chunk));
    window_run_ = llama_kv_ring(config(), cache_len_, run) ? run : 0;
    share_ = make_arena_share(planned_arena_bytes(
        build_llama_graph(config(), 1, window_run_ ? window_run_ : largest, o_.dtype, cache_len_, LlamaFeed::Inputs,
                          o_.sampling, quantized_, {}, window_run_),
        co));
  }
  co.arena_share = share_;
  Graph g = build_llama_graph(config(), 1, seq, o_.dtype, cache_len_, feed, o_.sampling, quantized_, {}, window_run_);
  auto exe = compile(g, co);
  if (with_params_) {
    exe->share_params_with(*with_params_);
  } else {
    model_->validate(g);
    model_->load_into(*exe, g);
    with_params_ = exe.get();
  }
  return exe;
}

Executable& LlamaGenerator::executable(int64_t bucket) {
  auto it = exes_.find(bucket);
  if (it != exes_.end()) return *it->second;
  return *exes_.emplace(bucket, compile_graph(bucket)).first->second;
}

Executable& LlamaGenerator::decode_executable() {
  if (!decode_) decode_ = compile_graph(1);
  return *decode_;
}

Executable& LlamaGenerator::state_fed_executable() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  RLX_CHECK(o_.kv_cache, "llama: decoding from state needs the KV cache");
  if (!state_fed_) state_fed_ = compile_graph(1, LlamaFeed::State);
  return *state_fed_;
}

// ids[start..] through a prefill bucket (the cache then holds ids), or with
// no cache the whole of ids with start 0. With window rings, in runs of at
// most window_run_ tokens (smaller buckets where a full one would pass the
// cache's end).
std::map<std::string, HostTensor> LlamaGenerator::prefill(const std::vector<int32_t>& ids, int64_t start) {
  const int64_t n = int64_t(ids.size());
  if (!window_run_) return prefill_run(ids, start, n, bucket_for(n - start));
  std::map<std::string, HostTensor> out;
  for (int64_t at = start; at < n;) {
    int64_t b = bucket_for(std::min(n - at, window_run_));
    while (b > 1 && at + b > cache_len_) b /= 2;
    const int64_t end = std::min(n, at + b);
    out = prefill_run(ids, at, end, b);
    at = end;
  }
  return out;
}

std::map<std::string, HostTensor> LlamaGenerator::prefill_run(const std::vector<int32_t>& ids, int64_t start,
                                                              int64_t end, int64_t b) {
  const int64_t n = end - start;
  Executable& exe = executable(b);
  std::vector<int32_t> padded(ids.begin() + start, ids.begin() + end);
  padded.resize(size_t(b), 0);  // after the last token: masked out by causality
  std::map<std::string, HostTensor> in{{"input_ids", HostTensor::from_i32({1, b}, padded)},
                                       {"last_index", HostTensor::from_i32({1}, {int32_t(n - 1)})}};
  if (o_.kv_cache) {
    in["pos"] = HostTensor::from_i32({1}, {int32_t(start)});
  } else {
    std::vector<int32_t> pos(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) pos[size_t(i)] = int32_t(i);
    in["positions"] = HostTensor::from_i32({b}, pos);
  }
  auto out = exe.run(in);
  last_device_us_ = exe.last_device_us();
  check_logits_finite(out, 1, "the forward pass over " + std::to_string(end) + " tokens");
  return out;
}

void LlamaGenerator::check_length(int64_t n) const {
  RLX_CHECK(n > 0, "llama: no tokens to continue");
  RLX_CHECK(n <= config().max_positions, "llama: " << n << " tokens exceed the context length "
                                                   << config().max_positions);
  RLX_CHECK(!max_tokens_ || n <= max_tokens_, "llama: " << n << " tokens exceed the " << max_tokens_ << " reserved");
}

std::map<std::string, HostTensor> LlamaGenerator::run_cached(const std::vector<int32_t>& ids) {
  const int64_t n = int64_t(ids.size());
  Executable& decode = decode_executable();
  const int64_t have = int64_t(cached_.size());
  const bool extends = have < n && std::equal(cached_.begin(), cached_.end(), ids.begin());
  cached_.clear();  // until this call succeeds the cache holds nothing reusable
  state_token_ = -1;
  std::map<std::string, HostTensor> out;
  if (extends && n - have == 1) {
    out = decode.run({{"input_ids", HostTensor::from_i32({1, 1}, {ids.back()})},
                      {"pos", HostTensor::from_i32({1}, {int32_t(have)})},
                      {"last_index", HostTensor::from_i32({1}, {0})}});
    last_device_us_ = decode.last_device_us();
    check_logits_finite(out, 1, "the forward pass over " + std::to_string(n) + " tokens");
  } else {
    // The new tokens after the cached prefix, or all of them when their
    // bucket would run past the cache's end.
    int64_t start = extends ? have : 0;
    if (!window_run_ && start + bucket_for(n - start) > cache_len_) start = 0;
    out = prefill(ids, start);
  }
  cached_ = ids;
  state_token_ = out.at("next_token").to_i32().at(0);
  return out;
}

std::vector<float> LlamaGenerator::next_logits(const std::vector<int32_t>& ids) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  check_length(int64_t(ids.size()));
  if (!o_.kv_cache) return prefill(ids, 0).at("logits").to_f32();
  return run_cached(ids).at("logits").to_f32();
}

int32_t LlamaGenerator::next_greedy(const std::vector<int32_t>& ids) {
  RLX_CHECK(o_.sampling.temperature <= 0.f, "llama: next_greedy on a generator that samples: use next_token");
  return next_token(ids);
}

int32_t LlamaGenerator::next_token(const std::vector<int32_t>& ids) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  const int64_t n = int64_t(ids.size());
  check_length(n);
  if (!o_.kv_cache) return sampler_.next(prefill(ids, 0).at("logits").to_f32(), n);
  // The state holds cached_ + [state_token_] at next_pos = cached_.size():
  // ids that are exactly that run from the state, with nothing copied in.
  const int64_t have = int64_t(cached_.size());
  if (state_token_ >= 0 && n == have + 1 && ids.back() == state_token_ && n <= cache_len_ &&
      std::equal(cached_.begin(), cached_.end(), ids.begin())) {
    Executable& step = state_fed_executable();
    cached_.clear();
    state_token_ = -1;
    const auto out = step.run({});
    check_logits_finite(out, 1, "the forward pass over " + std::to_string(n) + " tokens");
    const int32_t next = out.at("next_token").to_i32().at(0);
    last_device_us_ = step.last_device_us();
    cached_ = ids;
    state_token_ = next;
    return next;
  }
  return run_cached(ids).at("next_token").to_i32().at(0);
}

}  // namespace rlx
