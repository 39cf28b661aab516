#include "server/embedding_loop.h"

#include <algorithm>

#include "server/api_error.h"

namespace rlx::server {

EmbeddingLoop::EmbeddingLoop(Embedder& embedder, Metrics& metrics, int64_t max_batch_tokens, size_t max_waiting)
    : embedder_(embedder), metrics_(metrics), max_batch_tokens_(max_batch_tokens), max_waiting_(max_waiting) {
  thread_ = std::thread([this] { run(); });
}

EmbeddingLoop::~EmbeddingLoop() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<int64_t> EmbeddingLoop::token_counts(const std::vector<std::string>& texts) const {
  std::vector<int64_t> out;
  out.reserve(texts.size());
  // Counting stops one past the model's limit: a longer text costs no more.
  const int limit = embedder_.max_len() + 1;
  for (const std::string& t : texts) out.push_back(int64_t(embedder_.tokenizer().encode(t, limit).ids.size()));
  return out;
}

std::vector<std::vector<float>> EmbeddingLoop::embed(const std::vector<std::string>& texts, int64_t tokens) {
  auto job = std::make_shared<Job>();
  job->texts = texts;
  job->tokens = tokens;
  {
    std::unique_lock<std::mutex> lock(m_);
    if (!accepting_) throw ApiError{503, "the server is shutting down", "server_error", "", "shutting_down", 1};
    if (inbox_.size() >= max_waiting_) {
      throw ApiError{503, "the embedding queue is full (" + std::to_string(max_waiting_) +
                              " waiting requests, --max-queue): retry later",
                     "server_error", "", "queue_full", 1};
    }
    inbox_.push_back(job);
    ++requests_;
    cv_.notify_all();
    done_cv_.wait(lock, [&] { return job->finished; });
  }
  if (!job->failure.empty()) throw ApiError{500, job->failure, "server_error", "", "internal_error"};
  return std::move(job->rows);
}

void EmbeddingLoop::drain() {
  std::unique_lock<std::mutex> lock(m_);
  accepting_ = false;
  done_cv_.wait(lock, [&] { return inbox_.empty() && busy_ == 0; });
}

size_t EmbeddingLoop::load() const {
  std::lock_guard<std::mutex> lock(m_);
  return inbox_.size() + busy_;
}

uint64_t EmbeddingLoop::requests() const {
  std::lock_guard<std::mutex> lock(m_);
  return requests_;
}

size_t EmbeddingLoop::waiting() const {
  std::lock_guard<std::mutex> lock(m_);
  return inbox_.size();
}

void EmbeddingLoop::run() {
  while (true) {
    std::vector<std::shared_ptr<Job>> batch;
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return stop_ || !inbox_.empty(); });
      if (stop_) break;
      // Whole requests, oldest first, while they fit (the first always runs).
      int64_t tokens = 0;
      while (!inbox_.empty() && (batch.empty() || tokens + inbox_.front()->tokens <= max_batch_tokens_)) {
        tokens += inbox_.front()->tokens;
        batch.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
      }
      busy_ = batch.size();
    }
    std::vector<std::string> texts;
    for (const auto& j : batch) texts.insert(texts.end(), j->texts.begin(), j->texts.end());
    std::vector<std::vector<float>> rows;
    std::string failure;
    try {
      rows = embedder_.embed(texts);
      metrics_.embedded_texts += texts.size();
    } catch (const std::exception& e) {
      failure = std::string("embedding failed: ") + e.what();
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      size_t at = 0;
      for (const auto& j : batch) {
        if (failure.empty()) {
          j->rows.assign(std::make_move_iterator(rows.begin() + int64_t(at)),
                         std::make_move_iterator(rows.begin() + int64_t(at + j->texts.size())));
        } else {
          j->failure = failure;
        }
        at += j->texts.size();
        j->finished = true;
      }
      busy_ = 0;
    }
    done_cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(m_);
  for (const auto& j : inbox_) {
    j->failure = "the server stopped";
    j->finished = true;
  }
  done_cv_.notify_all();
}

}  // namespace rlx::server
