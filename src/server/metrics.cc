#include "server/metrics.h"

#include <cstdio>

namespace rlx::server {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(m_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++n_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(m_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(n_) + "\n";
}

Metrics::Metrics()
    : time_to_first_token_s({0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30}),
      inter_token_latency_s({0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}),
      request_duration_s({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::request_done(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(m_);
  ++requests_[{route, status}];
}

void Metrics::add_gauge(const std::string& name, const std::string& help, std::function<double()> value) {
  std::lock_guard<std::mutex> lock(m_);
  gauges_.emplace_back(name, help, std::move(value));
}

void Metrics::add_family(const std::string& name, const std::string& help, const std::string& type,
                         std::vector<Sample> samples) {
  std::lock_guard<std::mutex> lock(m_);
  families_.emplace_back(name, help, type, std::move(samples));
}

std::string Metrics::text() const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(m_);
    out += "# HELP rlx_requests_total HTTP requests answered, by route and status\n# TYPE rlx_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      out += "rlx_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
             std::to_string(n) + "\n";
    }
    for (const auto& [name, help, value] : gauges_) {
      out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + num(value()) + "\n";
    }
    for (const auto& [name, help, type, samples] : families_) {
      out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
      for (const Sample& x : samples) out += name + "{" + x.labels + "} " + num(x.value()) + "\n";
    }
  }
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(v) + "\n";
  };
  counter("rlx_generated_tokens_total", "tokens generated", generated_tokens.load());
  counter("rlx_prompt_tokens_total", "prompt tokens of generation requests", prompt_tokens.load());
  counter("rlx_embedded_texts_total", "texts embedded", embedded_texts.load());
  time_to_first_token_s.write(out, "rlx_time_to_first_token_seconds", "from a generation request's arrival to its first token");
  inter_token_latency_s.write(out, "rlx_inter_token_latency_seconds", "between consecutive tokens of one stream");
  request_duration_s.write(out, "rlx_request_duration_seconds", "generation requests, arrival to last token");
  return out;
}

}  // namespace rlx::server
