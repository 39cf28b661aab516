#include "models/llama_batch_generator.h"

#include <algorithm>

#include "rlx/error.h"

namespace rlx {

LlamaBatchGenerator::LlamaBatchGenerator(const LlamaGenerator& model, int64_t batch, int64_t max_tokens)
    : model_(model), batch_(batch), max_tokens_(max_tokens) {
  const LlamaConfig& c = model.config();
  RLX_CHECK(batch > 0, "llama batch: batch must be positive, not " << batch);
  RLX_CHECK(max_tokens > 1 && max_tokens <= c.max_positions,
            "llama batch: " << max_tokens << " tokens per sequence (the context length is " << c.max_positions
                            << ")");
  RLX_CHECK(model.options().sampling.temperature <= 0.f,
            "llama batch: batched decoding is greedy: the generator's options sample (temperature "
                << model.options().sampling.temperature << ")");
  cache_len_ = llama_length_bucket(max_tokens, c.max_positions);
}

LlamaBatchGenerator::~LlamaBatchGenerator() = default;

std::unique_ptr<Executable> LlamaBatchGenerator::compile_graph(int64_t seq, LlamaFeed feed) {
  const GeneratorOptions& o = model_.options();
  CompileOptions co;
  co.device = o.device;
  co.threads = o.threads;
  co.mode = o.mode;
  auto graph = [&](int64_t s, LlamaFeed f) {
    return build_llama_graph(model_.config(), batch_, s, o.dtype, cache_len_, f, o.sampling,
                             model_.quantized_weights());
  };
  if (!share_) {
    // Sized for the largest prefill any prompt (< max_tokens) can need and
    // the decode step; all the batch's graphs lay out weights and state alike.
    const Graph largest = graph(llama_length_bucket(max_tokens_ - 1, model_.config().max_positions), LlamaFeed::Inputs);
    share_ = make_arena_share(
        std::max(planned_arena_bytes(largest, co), planned_arena_bytes(graph(1, LlamaFeed::State), co)));
  }
  co.arena_share = share_;
  const Graph g = graph(seq, feed);
  auto exe = compile(g, co);
  if (with_params_) {
    exe->share_params_with(*with_params_);
  } else {
    model_.weights().validate(g);
    model_.weights().load_into(*exe, g);
    with_params_ = exe.get();
  }
  return exe;
}

Executable& LlamaBatchGenerator::prefill_executable(int64_t bucket) {
  auto it = prefill_.find(bucket);
  if (it != prefill_.end()) return *it->second;
  return *prefill_.emplace(bucket, compile_graph(bucket, LlamaFeed::Inputs)).first->second;
}

Executable& LlamaBatchGenerator::decode_executable() {
  if (!step_) step_ = compile_graph(1, LlamaFeed::State);
  return *step_;
}

void LlamaBatchGenerator::prepare(int64_t prompt_len) {
  RLX_CHECK(prompt_len > 0 && prompt_len < max_tokens_,
            "llama batch: prompts of " << prompt_len << " tokens with " << max_tokens_ << " per sequence");
  prefill_executable(llama_length_bucket(prompt_len, model_.config().max_positions));
  decode_executable();
}

uint64_t LlamaBatchGenerator::prefill_runs() const {
  uint64_t n = 0;
  for (const auto& [b, e] : prefill_) n += e->run_count();
  return n;
}

std::vector<int64_t> LlamaBatchGenerator::buckets() const {
  std::vector<int64_t> out;
  for (const auto& [b, e] : prefill_) out.push_back(b);
  return out;
}

// All prompts go through one prefill run of a batch-B graph, right-padded to
// the bucket of the longest, rather than one batch-1 prefill each: one run
// and one compiled graph per bucket instead of B runs, and the prefill reads
// the weights once for all B prompts. Padding needs no mask: sequence b's
// pad tokens sit after its last one, so causality keeps them out of its
// real tokens, and the cache rows they write (len_b onwards) are each
// overwritten by a decode step before any query reads them (a step at
// position p writes row p, then attends rows 0..p). last_index picks each
// sequence's last real row, so next_pos becomes len_b and next_token its
// first new token.
std::vector<int32_t> LlamaBatchGenerator::start(const std::vector<std::vector<int32_t>>& prompts) {
  RLX_CHECK(int64_t(prompts.size()) == batch_,
            "llama batch: " << prompts.size() << " prompts for a batch of " << batch_);
  int64_t longest = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const int64_t n = int64_t(prompts[b].size());
    RLX_CHECK(n > 0 && n < max_tokens_, "llama batch: prompt " << b << " has " << n << " tokens (1 to "
                                                               << max_tokens_ - 1 << " fit)");
    for (int32_t id : prompts[b])
      RLX_CHECK(id >= 0 && id < model_.config().vocab_size,
                "llama batch: prompt " << b << " holds token id " << id << ", outside the vocabulary");
    longest = std::max(longest, n);
  }
  const int64_t L = llama_length_bucket(longest, model_.config().max_positions);
  Executable& exe = prefill_executable(L);
  std::vector<int32_t> ids(size_t(batch_ * L), 0);
  std::vector<int32_t> last(static_cast<size_t>(batch_));
  for (int64_t b = 0; b < batch_; ++b) {
    std::copy(prompts[size_t(b)].begin(), prompts[size_t(b)].end(), ids.begin() + b * L);
    last[size_t(b)] = int32_t(b * L + int64_t(prompts[size_t(b)].size()) - 1);
  }
  pos_.clear();  // until this run succeeds the state holds nothing to step from
  std::vector<int32_t> first = exe.run({{"input_ids", HostTensor::from_i32({batch_, L}, ids)},
                                        {"pos", HostTensor::from_i32({batch_}, std::vector<int32_t>(size_t(batch_), 0))},
                                        {"last_index", HostTensor::from_i32({batch_}, last)}})
                                   .at("next_token")
                                   .to_i32();
  for (const auto& p : prompts) pos_.push_back(int64_t(p.size()));
  return first;
}

std::vector<int32_t> LlamaBatchGenerator::step() {
  RLX_CHECK(!pos_.empty(), "llama batch: step() before start()");
  for (size_t b = 0; b < pos_.size(); ++b)
    RLX_CHECK(pos_[b] < cache_len_, "llama batch: sequence " << b << " has filled the cache's " << cache_len_
                                                             << " rows");
  Executable& exe = decode_executable();
  std::vector<int64_t> pos = std::move(pos_);
  pos_.clear();
  std::vector<int32_t> next = exe.run({}).at("next_token").to_i32();
  for (int64_t& p : pos) ++p;
  pos_ = std::move(pos);
  return next;
}

std::vector<std::vector<int32_t>> LlamaBatchGenerator::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                                int n, int32_t stop) {
  RLX_CHECK(n >= 0, "llama batch: n must be >= 0");
  for (size_t b = 0; b < prompts.size(); ++b)
    RLX_CHECK(int64_t(prompts[b].size()) + n <= max_tokens_,
              "llama batch: prompt " << b << " (" << prompts[b].size() << " tokens) and " << n
                                     << " new tokens exceed the " << max_tokens_ << " per sequence");
  std::vector<std::vector<int32_t>> out(prompts.size());
  if (n == 0) return out;
  std::vector<bool> done(prompts.size(), false);
  size_t live = prompts.size();
  auto take = [&](const std::vector<int32_t>& tokens) {
    for (size_t b = 0; b < out.size(); ++b) {
      if (done[b]) continue;
      if (tokens[b] != stop) out[b].push_back(tokens[b]);  // ids are >= 0: stop -1 never matches
      if (tokens[b] == stop || int(out[b].size()) == n) {
        done[b] = true;
        --live;
      }
    }
  };
  take(start(prompts));
  while (live > 0) take(step());
  return out;
}

}  // namespace rlx
