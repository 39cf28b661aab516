// Prometheus counters and histograms of the server (GET /metrics, text
// format 0.0.4). Thread-safe: HTTP threads and the model loops record here.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace rlx::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex m_;
  std::vector<uint64_t> counts_;  // one per bound, then +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

class Metrics {
 public:
  Metrics();
  void request_done(const std::string& route, int status);
  std::atomic<uint64_t> generated_tokens{0}, prompt_tokens{0}, embedded_texts{0};
  Histogram time_to_first_token_s, inter_token_latency_s, request_duration_s;
  // Gauges read when /metrics is asked for: name -> (help, value).
  void add_gauge(const std::string& name, const std::string& help, std::function<double()> value);
  // A labelled family ("counter" or "gauge"): one sample per entry, its
  // labels as Prometheus writes them (replica="0",devices="cuda:0").
  struct Sample {
    std::string labels;
    std::function<double()> value;
  };
  void add_family(const std::string& name, const std::string& help, const std::string& type, std::vector<Sample> samples);
  std::string text() const;

 private:
  mutable std::mutex m_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::vector<std::tuple<std::string, std::string, std::function<double()>>> gauges_;
  std::vector<std::tuple<std::string, std::string, std::string, std::vector<Sample>>> families_;
};

}  // namespace rlx::server
