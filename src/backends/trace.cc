#include "backends/trace.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

namespace rlx {

TraceRequest parse_trace_env(const char* value) {
  TraceRequest r;
  if (!value) return r;
  r.runs = std::strcmp(value, "1") == 0;
  r.schedule = std::strcmp(value, "schedule") == 0;
  r.decode = std::strcmp(value, "decode") == 0;
  return r;
}

std::string schedule_summary(const Schedule& s, const char* backend, const char* mode,
                             const std::string& schedule_string) {
  char line[256];
  std::snprintf(line, sizeof line, "rlx %s: mode %s, %zu thunks, arena %llu bytes\n", backend, mode, s.thunks.size(),
                (unsigned long long)s.arena_bytes);
  std::string out = line;
  for (const auto& [name, n] : s.histogram()) {
    std::snprintf(line, sizeof line, "  %-14s %d\n", name.c_str(), n);
    out += line;
  }
  return out + "  schedule " + schedule_string + "\n";
}

std::string run_line(const char* mode, double encode_us, double submit_us, double wait_us) {
  char line[256];
  std::snprintf(line, sizeof line, "rlx trace: %s encode %.1f us submit %.1f us wait %.1f us\n", mode, encode_us,
                submit_us, wait_us);
  return line;
}

std::string chrome_trace_json(const std::vector<ThunkTime>& times) {
  nlohmann::json events = nlohmann::json::array();
  for (const ThunkTime& t : times)
    events.push_back({{"name", t.name},
                      {"cat", t.category},
                      {"ph", "X"},
                      {"ts", t.start_us},
                      {"dur", t.duration_us},
                      {"pid", 0},
                      {"tid", 0}});
  return nlohmann::json{{"traceEvents", events}}.dump(1) + "\n";
}

std::vector<ThunkTime> thunk_times(const Schedule& s, const std::vector<float>& durations_ms) {
  RLX_CHECK(durations_ms.size() == s.thunks.size(),
            "trace: " << durations_ms.size() << " times for " << s.thunks.size() << " thunks");
  std::vector<ThunkTime> times;
  double start_us = 0;
  for (size_t i = 0; i < s.thunks.size(); ++i) {
    const Thunk& t = s.thunks[i];
    const char* kind = thunk_name(t.kind());
    times.push_back({t.label.empty() ? kind : t.label, kind, start_us, double(durations_ms[i]) * 1000.0});
    start_us += double(durations_ms[i]) * 1000.0;
  }
  return times;
}

std::vector<std::string> label_parts(const char* value) {
  std::vector<std::string> parts;
  for (std::string_view v(value ? value : ""); !v.empty();) {
    const size_t comma = v.find(',');
    if (comma != 0) parts.emplace_back(v.substr(0, comma));
    v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
  }
  return parts;
}

bool label_has_part(std::string_view label, const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    if (label.find(part) != std::string_view::npos) return true;
  return false;
}

std::vector<bool> omitted_thunks(const Schedule& s, const char* value) {
  const std::vector<std::string> parts = label_parts(value);
  if (parts.empty()) return {};
  std::vector<bool> omit(s.thunks.size(), false);
  size_t n = 0;
  for (size_t i = 0; i < s.thunks.size(); ++i)
    if (label_has_part(s.thunks[i].label, parts)) {
      omit[i] = true;
      ++n;
    }
  if (n > 0)
    std::fprintf(stderr, "rlx: RLX_OMIT=%s leaves out %zu of %zu thunks: results are wrong (for measuring only)\n",
                 value, n, s.thunks.size());
  return omit;
}

}  // namespace rlx
