// The scheduler: each step runs one prefill chunk (the oldest waiting
// request's) and then one decode run for every request that has a token to
// feed, each row at its own slot and position.
#include <algorithm>
#include <random>

#include "engine/engine_impl.h"
#include "rlx/error.h"

namespace rlx {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Eos: return "eos";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::None: break;
  }
  return "none";
}

// ---- Sequence ----

Sequence::Sequence(std::unique_ptr<State> s) : s_(std::move(s)) {}

Sequence::~Sequence() {
  if (!s_ || !s_->engine) return;
  std::lock_guard<std::recursive_mutex> lock(s_->engine->mu);
  s_->engine->forget(*s_);
  s_->engine->free_slot(s_->slot);
}

const std::vector<int32_t>& Sequence::tokens() const { return s_->tokens; }
int64_t Sequence::cached_tokens() const { return s_->cached; }
int Sequence::slot() const { return s_->slot; }

void Sequence::truncate(int64_t n) {
  std::lock_guard<std::recursive_mutex> lock(s_->engine->mu);
  RLX_CHECK(s_->request == 0, "sequence: cannot truncate while a request is running on it");
  RLX_CHECK(n >= 0, "sequence: truncate to " << n << " tokens");
  if (n >= int64_t(s_->tokens.size())) return;
  s_->tokens.resize(size_t(n));
  // Rows past n are overwritten before they are read; a ring keeps the
  // window before n only when n is at most one token back from the end of
  // what it holds (kv_ring_rows' margin).
  const bool ring_lost = s_->engine->runner.window_rings() && n + 1 < s_->cached;
  s_->cached = ring_lost ? 0 : std::min(s_->cached, n);
}

// ---- Engine ----

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Engine::RequestId Engine::submit(Sequence& seq, std::vector<int32_t> append, const GenerateOptions& o,
                                 StreamCallback on_piece, DoneCallback on_done) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  return impl_->submit(seq.state(), std::move(append), o, std::move(on_piece), std::move(on_done));
}
void Engine::cancel(RequestId id) {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  impl_->cancel(id);
}
bool Engine::step() {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  return impl_->step();
}
bool Engine::idle() const {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  return impl_->requests.empty();
}
size_t Engine::running() const {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  return impl_->requests.size();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::recursive_mutex> lock(impl_->mu);
  EngineStats s;
  const PoolRunner& r = impl_->runner;
  s.prefill_runs = r.prefill_runs();
  s.decode_runs = r.decode_runs();
  s.prefilled_tokens = impl_->prefilled_tokens;
  s.decoded_tokens = impl_->decoded_tokens;
  s.weight_bytes = r.weight_bytes();
  s.kv_pool_bytes = r.kv_pool_bytes();
  s.arena_bytes = r.arena_bytes();
  s.compiled_graphs = r.compiled_graphs();
  return s;
}

Engine::Impl::Impl(PoolRunner& r, const TextTokenizer* tok, int32_t eos) : runner(r), tokenizer(tok), eos_id(eos) {
  for (int s = r.sequences() - 1; s >= 0; --s) free_slots.push_back(s);
}

int Engine::Impl::take_slot() {
  RLX_CHECK(!free_slots.empty(), "engine: all " << runner.sequences()
                                                << " sequence slots are in use (raise max_sequences)");
  const int s = free_slots.back();
  free_slots.pop_back();
  return s;
}

void Engine::Impl::free_slot(int slot) { free_slots.push_back(slot); }

Engine::RequestId Engine::Impl::submit(Sequence::State& seq, std::vector<int32_t> append, const GenerateOptions& o,
                                       StreamCallback on_piece, DoneCallback on_done) {
  RLX_CHECK(seq.engine == this, "engine: the sequence belongs to another model");
  RLX_CHECK(seq.request == 0, "engine: the sequence already has a request running");
  RLX_CHECK(o.max_tokens >= 1, "max_tokens " << o.max_tokens << " must be >= 1");
  check_sampling(o.sampling);
  for (int32_t id : append)
    RLX_CHECK(id >= 0 && id < runner.vocab(), "prompt token " << id << " is outside the vocabulary [0, "
                                                               << runner.vocab() << ")");
  for (int32_t id : o.stop_ids)
    RLX_CHECK(id >= 0 && id < runner.vocab(), "stop id " << id << " is outside the vocabulary [0, "
                                                          << runner.vocab() << ")");
  const int64_t total = int64_t(seq.tokens.size() + append.size());
  RLX_CHECK(total >= 1, "engine: nothing to continue from (an empty prompt)");
  RLX_CHECK(total <= runner.cache_len(), "engine: the prompt needs " << total << " tokens, the context holds "
                                                                     << runner.cache_len() << " (ctx_size)");
  const uint64_t seed = o.sampling.seed ? *o.sampling.seed : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  auto r = std::unique_ptr<Request>(new Request{next_id++, &seq, o, std::move(on_piece), std::move(on_done),
                                                TokenChoice(o.sampling, seed), TextStream(o.stop), {}, {}, true, false});
  r->result.seed = seed;
  r->result.prompt_tokens = int64_t(append.size());
  seq.tokens.insert(seq.tokens.end(), append.begin(), append.end());
  // The last token's logits are needed: with every token cached, run it again.
  seq.cached = std::min<int64_t>(seq.cached, int64_t(seq.tokens.size()) - 1);
  seq.request = r->id;
  requests.push_back(std::move(r));
  return seq.request;
}

void Engine::Impl::cancel(RequestId id) {
  for (auto& r : requests)
    if (r->id == id) r->cancelled = true;
}

void Engine::Impl::forget(Sequence::State& seq) {
  if (seq.request == 0) return;
  requests.erase(std::remove_if(requests.begin(), requests.end(), [&](const auto& r) { return r->seq == &seq; }),
                 requests.end());
  seq.request = 0;
}

void Engine::Impl::emit(Request& r, const std::string& text) {
  if (text.empty() && r.unshown.empty()) return;
  TextPiece p{text, std::move(r.unshown)};
  r.unshown.clear();
  if (r.on_piece && !r.on_piece(p) && r.result.finish == FinishReason::None) r.result.finish = FinishReason::Cancelled;
}

void Engine::Impl::finish(Request& r, FinishReason why) {
  if (r.result.finish == FinishReason::None) r.result.finish = why;
  emit(r, r.stream.finish());
}

void Engine::Impl::take_token(Request& r, const PoolRunner::Choice& c) {
  Sequence::State& s = *r.seq;
  std::vector<float> logits = c.logits;
  const int32_t t = r.choice.choose(c.argmax, logits, s.tokens, int64_t(s.tokens.size()));
  s.tokens.push_back(t);
  r.result.ids.push_back(t);
  r.unshown.push_back(t);
  if (!r.o.ignore_eos && t == eos_id) return finish(r, FinishReason::Eos);
  if (std::find(r.o.stop_ids.begin(), r.o.stop_ids.end(), t) != r.o.stop_ids.end())
    return finish(r, FinishReason::Stop);
  const std::string text = tokenizer ? r.stream.push(tokenizer->token_bytes(t)) : std::string();
  if (r.stream.stopped()) {
    emit(r, text);
    return finish(r, FinishReason::Stop);
  }
  emit(r, text);
  if (r.result.finish != FinishReason::None) return finish(r, r.result.finish);
  if (int64_t(r.result.ids.size()) >= r.o.max_tokens) return finish(r, FinishReason::Length);
  // The new token could not be fed: its row would lie past the slot.
  if (int64_t(s.tokens.size()) > runner.cache_len()) {
    r.result.context_full = true;
    return finish(r, FinishReason::Length);
  }
}

void Engine::Impl::prefill_one(Request& r) {
  Sequence::State& s = *r.seq;
  const int64_t n = int64_t(s.tokens.size()) - s.cached;
  const int64_t take = runner.prefill_take(s.cached, n);
  const bool last = take == n;
  std::vector<int32_t> chunk(s.tokens.begin() + s.cached, s.tokens.begin() + s.cached + take);
  PoolRunner::Choice c = runner.prefill(s.slot, chunk, s.cached, last && r.choice.needs_logits());
  s.cached += take;
  prefilled_tokens += uint64_t(take);
  r.result.prefilled_tokens += take;
  if (!last) return;
  r.prefilling = false;
  take_token(r, c);
}

void Engine::Impl::decode_all() {
  std::vector<Request*> rows;
  for (auto& r : requests)
    if (!r->prefilling && r->result.finish == FinishReason::None && !r->cancelled) rows.push_back(r.get());
  if (rows.empty()) return;
  std::vector<PoolRunner::DecodeRow> in;
  bool logits = false;
  for (Request* r : rows) {
    const Sequence::State& s = *r->seq;
    in.push_back({s.slot, s.tokens.back(), s.cached});
    logits = logits || r->choice.needs_logits();
  }
  const std::vector<PoolRunner::Choice> out = runner.decode(in, logits);
  decoded_tokens += rows.size();
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i]->seq->cached += 1;
    take_token(*rows[i], out[i]);
  }
}

void Engine::Impl::retire_finished() {
  std::vector<std::unique_ptr<Request>> done;
  for (auto it = requests.begin(); it != requests.end();) {
    Request& r = **it;
    if (r.cancelled && r.result.finish == FinishReason::None) finish(r, FinishReason::Cancelled);
    if (r.result.finish == FinishReason::None) {
      ++it;
      continue;
    }
    done.push_back(std::move(*it));
    it = requests.erase(it);
  }
  // After the queue is settled: a callback may submit the next request.
  for (auto& r : done) {
    r->seq->request = 0;
    r->result.text = r->stream.text();
    if (r->on_done) r->on_done(r->result);
  }
}

bool Engine::Impl::step() {
  retire_finished();
  if (requests.empty()) return false;
  for (auto& r : requests)
    if (r->prefilling && !r->cancelled) {
      prefill_one(*r);
      break;
    }
  decode_all();
  retire_finished();
  return true;
}

}  // namespace rlx
