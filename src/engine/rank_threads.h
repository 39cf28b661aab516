// Runs one function on every rank of a tensor-parallel group at once: rank
// 0 on the caller's thread, the others on threads of their own that live as
// long as this object (a decode step does not start threads). The ranks of
// one group must run together: each waits for the others at its graph's
// all_reduce nodes.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rlx {

class RankThreads {
 public:
  explicit RankThreads(int ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int ranks() const { return ranks_; }
  // f(rank) for every rank, returning when all have returned. When a rank
  // throws, on_error(what) runs at once (so that the others, waiting for it
  // at an all_reduce, fail too) and the first error is rethrown here.
  void run(const std::function<void(int)>& f, const std::function<void(const std::string&)>& on_error = {});

 private:
  void worker(int rank);
  void failed(std::exception_ptr e);

  int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int)>* job_ = nullptr;
  const std::function<void(const std::string&)>* on_error_ = nullptr;
  uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace rlx
