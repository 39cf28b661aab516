// Tracing a backend's runs, the host-only part (the CPU suite tests it):
// what RLX_TRACE asks for, the schedule summary printed at prepare, the
// per-run line, and Chrome-trace JSON from per-thunk times. The CUDA tracer
// (backends/cuda/tracer.h) measures; this formats.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "thunks/thunk.h"

namespace rlx {

struct TraceRequest {
  bool runs = false;      // RLX_TRACE=1: one line per run
  bool schedule = false;  // RLX_TRACE=schedule: histogram and schedule at prepare
  bool decode = false;    // RLX_TRACE=decode: per generated token, host and device time
};
TraceRequest parse_trace_env(const char* value);  // nullptr = nothing

// "rlx cuda: mode graph, 5 thunks, arena N bytes", the histogram by kind and
// the schedule string ('+' recorded, '-' per op).
std::string schedule_summary(const Schedule& s, const char* backend, const char* mode,
                             const std::string& schedule_string);
std::string run_line(const char* mode, double encode_us, double submit_us, double wait_us);

struct ThunkTime {
  std::string name, category;
  double start_us = 0, duration_us = 0;
};
// One complete ("X") event per thunk on one track: {"traceEvents": [...]}.
std::string chrome_trace_json(const std::vector<ThunkTime>& times);
// Times for s's thunks laid end to end from per-thunk durations (ms).
std::vector<ThunkTime> thunk_times(const Schedule& s, const std::vector<float>& durations_ms);

// RLX_OMIT=a,b (for measuring only): the thunks whose label contains any of
// the comma-separated strings are left out of every forward, so the time a
// kind of thunk costs inside a recorded forward is the difference with and
// without it. Results are wrong while it is set: a line on stderr says so
// once per schedule that omits anything. Empty when value is null or empty.
std::vector<bool> omitted_thunks(const Schedule& s, const char* value);

// The non-empty comma-separated parts of value (null: none), and whether a
// label contains one of them: RLX_OMIT's and RLX_PDL_OFF_FOR's matching.
std::vector<std::string> label_parts(const char* value);
bool label_has_part(std::string_view label, const std::vector<std::string>& parts);

}  // namespace rlx
