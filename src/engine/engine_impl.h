// The engine's insides, shared by engine.cc (the scheduler and sequences)
// and llm.cc (the model that owns them).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/pool_runner.h"
#include "engine/text_stream.h"
#include "engine/token_choice.h"
#include "rlx/llm.h"
#include "tokenizers/text_tokenizer.h"

namespace rlx {

struct Sequence::State {
  Engine::Impl* engine = nullptr;
  int slot = -1;
  std::vector<int32_t> tokens;  // every token so far
  int64_t cached = 0;           // tokens[0, cached) have K/V rows in the slot
  Engine::RequestId request = 0;  // the running request, 0 when none
};

struct Engine::Impl {
  Impl(PoolRunner& runner, const TextTokenizer* tokenizer, int32_t eos_id);

  struct Request {
    RequestId id = 0;
    Sequence::State* seq = nullptr;
    GenerateOptions o;
    StreamCallback on_piece;
    DoneCallback on_done;
    TokenChoice choice;
    TextStream stream;
    Generation result;
    std::vector<int32_t> unshown;  // ids produced since the last piece
    bool prefilling = true;
    bool cancelled = false;
  };

  int take_slot();  // throws when every slot is held
  void free_slot(int slot);
  RequestId submit(Sequence::State& seq, std::vector<int32_t> append, const GenerateOptions& o,
                   StreamCallback on_piece, DoneCallback on_done);
  void cancel(RequestId id);
  bool step();
  // The sequence is going away: its request (if any) ends without callbacks.
  void forget(Sequence::State& seq);

  PoolRunner& runner;
  const TextTokenizer* tokenizer;
  int32_t eos_id;
  std::vector<int> free_slots;
  // Held by every public call that reads or changes the engine (LLM,
  // Engine, Sequence), so that callers on several threads are serialised.
  // Recursive: LLM::generate steps the engine, and stream callbacks may call
  // back into it on the same thread.
  mutable std::recursive_mutex mu;
  std::deque<std::unique_ptr<Request>> requests;  // in arrival order
  RequestId next_id = 1;
  uint64_t prefilled_tokens = 0, decoded_tokens = 0;

 private:
  void prefill_one(Request& r);
  void decode_all();
  void take_token(Request& r, const PoolRunner::Choice& c);
  void finish(Request& r, FinishReason why);
  void emit(Request& r, const std::string& text);
  void retire_finished();
};

}  // namespace rlx

namespace rlx {
// The pool runner an engine steps (tests assert how its executables ran).
inline PoolRunner& pool_runner_of(Engine& e) { return e.impl().runner; }
}  // namespace rlx
