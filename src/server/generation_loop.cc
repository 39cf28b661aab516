#include "server/generation_loop.h"

#include <algorithm>

#include "rlx/error.h"
#include "server/api_error.h"

namespace rlx::server {

bool GenerationJob::wait(Clock::time_point until) {
  std::unique_lock<std::mutex> lock(m);
  return cv.wait_until(lock, until, [&] { return finished || !pieces.empty(); });
}

GenerationLoop::GenerationLoop(LLM& llm, Metrics& metrics, size_t max_waiting)
    : llm_(llm), metrics_(metrics), max_waiting_(max_waiting) {
  thread_ = std::thread([this] { run(); });
}

GenerationLoop::~GenerationLoop() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<GenerationJob> GenerationLoop::submit(std::vector<int32_t> prompt, const GenerateOptions& o,
                                                      double time_limit_s) {
  auto job = std::make_shared<GenerationJob>();
  job->prompt = std::move(prompt);
  job->options = o;
  job->arrived = Clock::now();
  job->deadline = time_limit_s > 0 ? job->arrived + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(time_limit_s))
                                   : Clock::time_point::max();
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!accepting_) {
      throw ApiError{503, "the server is shutting down", "server_error", "", "shutting_down", 1};
    }
    // Jobs beyond the free slots wait; at most max_waiting_ of them.
    const size_t free_slots = size_t(llm_.max_sequences()) - std::min(size_t(llm_.max_sequences()), running_.load());
    if (inbox_.size() + waiting_.load() >= max_waiting_ + free_slots) {
      throw ApiError{503, "the generation queue is full (" + std::to_string(max_waiting_) +
                              " waiting requests, --max-queue): retry later",
                     "server_error", "", "queue_full", 1};
    }
    inbox_.push_back(job);
    ++submitted_;
  }
  cv_.notify_all();
  return job;
}

void GenerationLoop::drain() {
  std::unique_lock<std::mutex> lock(m_);
  accepting_ = false;
  drained_.wait(lock, [&] { return inbox_.empty() && waiting_.load() == 0 && running_.load() == 0; });
}

size_t GenerationLoop::waiting() const {
  std::lock_guard<std::mutex> lock(m_);
  return inbox_.size() + waiting_.load();
}
size_t GenerationLoop::running() const { return running_.load(); }
int GenerationLoop::slots_held() const { return slots_held_.load(); }
int64_t GenerationLoop::cached_tokens() const { return cached_tokens_.load(); }

// The idle slot whose tokens share the longest prefix with the prompt; else
// a new slot; else the idle slot sharing least (its cache is dropped).
Sequence* GenerationLoop::take_sequence(const std::vector<int32_t>& prompt, int64_t& common) {
  auto shared_prefix = [&](const Sequence* s) {
    const auto& t = s->tokens();
    return int64_t(std::mismatch(t.begin(), t.end(), prompt.begin(), prompt.end()).first - t.begin());
  };
  common = 0;
  int best = -1;
  for (size_t i = 0; i < idle_.size(); ++i) {
    const int64_t c = shared_prefix(idle_[i]);
    if (best < 0 || c > common) best = int(i), common = c;
  }
  if ((best < 0 || common == 0) && int(sequences_.size()) < llm_.max_sequences()) {
    sequences_.push_back(llm_.new_sequence());
    slots_held_ = int(sequences_.size());
    common = 0;
    return sequences_.back().get();
  }
  if (best < 0) return nullptr;
  Sequence* s = idle_[size_t(best)];
  idle_.erase(idle_.begin() + best);
  return s;
}

void GenerationLoop::admit() {
  while (!waiting_jobs_.empty()) {
    std::shared_ptr<GenerationJob> job = waiting_jobs_.front();
    if (job->cancel.load() || Clock::now() > job->deadline) {
      waiting_jobs_.pop_front();
      std::lock_guard<std::mutex> lock(job->m);
      job->finished = true;
      job->timed_out = !job->cancel.load();
      job->result.finish = FinishReason::Cancelled;
      job->cv.notify_all();
      continue;
    }
    int64_t common = 0;
    Sequence* seq = take_sequence(job->prompt, common);
    if (!seq) break;  // every slot is running: wait for one to end
    waiting_jobs_.pop_front();
    // At least the last prompt token runs: its logits choose the first new one.
    const int64_t keep = std::min<int64_t>(common, int64_t(job->prompt.size()) - 1);
    seq->truncate(keep);
    job->cached_prompt_tokens = seq->cached_tokens() > 0 ? keep : 0;  // a window ring may have lost them
    std::vector<int32_t> append(job->prompt.begin() + keep, job->prompt.end());
    GenerationJob* j = job.get();
    auto last = std::make_shared<Clock::time_point>();
    const Engine::RequestId id = llm_.engine().submit(
        *seq, std::move(append), job->options,
        [this, j, last](const TextPiece& p) {
          const Clock::time_point now = Clock::now();
          const size_t n = p.ids.size();
          if (n > 0) {
            if (*last == Clock::time_point()) {
              metrics_.time_to_first_token_s.observe(std::chrono::duration<double>(now - j->arrived).count());
            } else {
              metrics_.inter_token_latency_s.observe(std::chrono::duration<double>(now - *last).count() / double(n));
            }
            *last = now;
            metrics_.generated_tokens += n;
          }
          {
            std::lock_guard<std::mutex> lock(j->m);
            j->pieces.push_back(p);
          }
          j->cv.notify_all();
          return !j->cancel.load();
        },
        [this, j](const Generation& g) {
          metrics_.request_duration_s.observe(std::chrono::duration<double>(Clock::now() - j->arrived).count());
          std::lock_guard<std::mutex> lock(j->m);
          j->result = g;
          j->finished = true;
          j->cv.notify_all();
        });
    metrics_.prompt_tokens += job->prompt.size();
    active_.push_back({id, Active{job, seq}});
    --waiting_;
    ++running_;
  }
}

// A job whose client went away or whose time is up ends at the next step.
void GenerationLoop::check_limits() {
  const Clock::time_point now = Clock::now();
  for (auto& [id, a] : active_) {
    if (a.job->cancel.load()) {
      llm_.engine().cancel(id);
    } else if (now > a.job->deadline) {
      {
        std::lock_guard<std::mutex> lock(a.job->m);
        a.job->timed_out = true;
      }
      llm_.engine().cancel(id);
    }
  }
}

void GenerationLoop::fail_running(const std::string& why) {
  for (auto& [id, a] : active_) {
    {
      std::lock_guard<std::mutex> lock(a.job->m);
      a.job->failure = why;
      a.job->finished = true;
    }
    a.job->cv.notify_all();
    llm_.engine().cancel(id);
  }
}

void GenerationLoop::run() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(m_);
      // Sleep only when nothing runs; wake for new jobs, and now and then for
      // the deadlines of jobs waiting for a slot.
      if (active_.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(waiting_jobs_.empty() ? 1000 : 20),
                     [&] { return stop_ || !inbox_.empty(); });
      }
      if (stop_) break;
      while (!inbox_.empty()) {
        waiting_jobs_.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
        ++waiting_;
      }
    }
    try {
      admit();
      check_limits();
      llm_.engine().step();
    } catch (const std::exception& e) {
      fail_running(std::string("generation failed: ") + e.what());
      try {
        while (llm_.engine().step()) {}
      } catch (const std::exception&) {
      }
    }
    // Jobs whose result is in: their slots go idle, their tokens stay cached.
    for (size_t i = 0; i < active_.size();) {
      bool done;
      {
        std::lock_guard<std::mutex> lock(active_[i].second.job->m);
        done = active_[i].second.job->finished;
      }
      if (done) {
        idle_.push_back(active_[i].second.seq);
        active_[i] = std::move(active_.back());
        active_.pop_back();
        --running_;
      } else {
        ++i;
      }
    }
    int64_t cached = 0;
    for (const auto& s : sequences_) cached += s->cached_tokens();
    cached_tokens_ = cached;
    {
      std::lock_guard<std::mutex> lock(m_);
      if (inbox_.empty() && waiting_.load() == 0 && running_.load() == 0) drained_.notify_all();
    }
  }
  // Stopping: every job still here ends, cancelled.
  for (auto& [id, a] : active_) {
    std::lock_guard<std::mutex> lock(a.job->m);
    a.job->finished = true;
    a.job->result.finish = FinishReason::Cancelled;
    a.job->cv.notify_all();
  }
  for (auto& job : waiting_jobs_) {
    std::lock_guard<std::mutex> lock(job->m);
    job->finished = true;
    job->result.finish = FinishReason::Cancelled;
    job->cv.notify_all();
  }
}

}  // namespace rlx::server
