#include "engine/rank_threads.h"

#include <stdexcept>

namespace rlx {

RankThreads::RankThreads(int ranks) : ranks_(ranks) {
  for (int r = 1; r < ranks_; ++r) threads_.emplace_back([this, r] { worker(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::failed(std::exception_ptr e) {
  std::string what = "a rank failed";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    what = x.what();
  } catch (...) {
  }
  const std::function<void(const std::string&)>* on_error = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = e;
    on_error = on_error_;
  }
  if (on_error && *on_error) (*on_error)(what);
}

void RankThreads::worker(int rank) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    try {
      (*job)(rank);
    } catch (...) {
      failed(std::current_exception());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    cv_.notify_all();
  }
}

void RankThreads::run(const std::function<void(int)>& f, const std::function<void(const std::string&)>& on_error) {
  if (ranks_ == 1) {
    f(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &f;
    on_error_ = &on_error;
    error_ = nullptr;
    running_ = ranks_ - 1;
    ++generation_;
  }
  cv_.notify_all();
  try {
    f(0);
  } catch (...) {
    failed(std::current_exception());
  }
  std::exception_ptr e;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return running_ == 0; });
    job_ = nullptr;
    on_error_ = nullptr;
    e = error_;
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace rlx
