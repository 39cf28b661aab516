// The thread that owns the embedding model: requests from HTTP threads are
// gathered into one embed() call while their tokens fit in
// max_batch_tokens (dynamic batching), and each gets its own rows back.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rlx/embedder.h"
#include "server/metrics.h"

namespace rlx::server {

class EmbeddingLoop {
 public:
  EmbeddingLoop(Embedder& embedder, Metrics& metrics, int64_t max_batch_tokens, size_t max_waiting);
  ~EmbeddingLoop();

  // Tokens each text takes in the model (special tokens included, before
  // truncation): what the request is charged and what batching counts.
  std::vector<int64_t> token_counts(const std::vector<std::string>& texts) const;
  // One row per text, in order; blocks until they are computed. ApiError 503
  // when the queue is full or the server is stopping.
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts, int64_t tokens);
  void drain();
  size_t waiting() const;
  size_t load() const;  // requests waiting and in the running batch
  uint64_t requests() const;  // requests taken so far

 private:
  struct Job {
    std::vector<std::string> texts;
    int64_t tokens = 0;
    std::vector<std::vector<float>> rows;
    std::string failure;
    bool finished = false;
  };
  void run();

  Embedder& embedder_;
  Metrics& metrics_;
  const int64_t max_batch_tokens_;
  const size_t max_waiting_;
  mutable std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::shared_ptr<Job>> inbox_;
  size_t busy_ = 0;
  uint64_t requests_ = 0;
  bool accepting_ = true, stop_ = false;
  std::thread thread_;
};

}  // namespace rlx::server
