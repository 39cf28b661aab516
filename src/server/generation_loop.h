// The thread that owns the decoder: HTTP threads hand it jobs; it admits them
// into the engine as KV slots allow (continuous batching: a job joins the
// running batch at the next step), steps the engine, and passes each job's
// text pieces and result back. A slot's tokens stay cached after its job
// ends, so a later prompt sharing their prefix (the next turn of a chat)
// runs only its new tokens.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rlx/llm.h"
#include "server/metrics.h"

namespace rlx::server {

using Clock = std::chrono::steady_clock;

struct GenerationJob {
  std::vector<int32_t> prompt;
  GenerateOptions options;
  Clock::time_point arrived, deadline;

  // Filled by the loop, read by the HTTP thread (under m).
  std::mutex m;
  std::condition_variable cv;
  std::deque<TextPiece> pieces;
  bool finished = false;
  bool timed_out = false;      // the time limit ended it
  std::string failure;         // an internal error ended it
  Generation result;
  int64_t cached_prompt_tokens = 0;  // prompt tokens found in the slot's cache

  std::atomic<bool> cancel{false};  // set by the HTTP thread: the client has gone

  // Waits until a piece or the end is there, or until `until`; true when
  // there is something to read.
  bool wait(Clock::time_point until);
};

class GenerationLoop {
 public:
  // max_waiting: jobs queued for a slot beyond those running; more are refused.
  GenerationLoop(LLM& llm, Metrics& metrics, size_t max_waiting);
  ~GenerationLoop();

  // Queues a job; ApiError 503 (Retry-After) when the queue is full or the
  // server is stopping.
  std::shared_ptr<GenerationJob> submit(std::vector<int32_t> prompt, const GenerateOptions& o, double time_limit_s);
  // Refuses new jobs and returns once every queued and running job has ended.
  void drain();

  size_t waiting() const;
  size_t running() const;
  uint64_t submitted() const { return submitted_.load(); }  // jobs accepted so far
  int slots_held() const;  // KV slots holding tokens (running or cached)
  int64_t cached_tokens() const;

 private:
  struct Active {
    std::shared_ptr<GenerationJob> job;
    Sequence* seq;
  };
  void run();
  void admit();
  void check_limits();
  void fail_running(const std::string& why);
  Sequence* take_sequence(const std::vector<int32_t>& prompt, int64_t& common);

  LLM& llm_;
  Metrics& metrics_;
  const size_t max_waiting_;
  mutable std::mutex m_;
  std::condition_variable cv_, drained_;
  std::deque<std::shared_ptr<GenerationJob>> inbox_;  // under m_
  bool accepting_ = true, stop_ = false;              // under m_
  std::atomic<size_t> waiting_{0}, running_{0};
  std::atomic<uint64_t> submitted_{0};
  std::atomic<int64_t> cached_tokens_{0};
  std::atomic<int> slots_held_{0};

  // Loop thread only.
  std::deque<std::shared_ptr<GenerationJob>> waiting_jobs_;
  std::vector<std::unique_ptr<Sequence>> sequences_;  // every slot taken so far
  std::vector<Sequence*> idle_;                       // of those, not running
  std::vector<std::pair<Engine::RequestId, Active>> active_;
  std::vector<Engine::RequestId> ended_;
  std::thread thread_;
};

}  // namespace rlx::server
