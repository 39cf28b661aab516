#include "backends/exec_mode.h"

#include <string>

namespace rlx {

const char* exec_mode_name(ExecMode m) {
  switch (m) {
    case ExecMode::Auto: return "auto";
    case ExecMode::PerOp: return "perop";
    case ExecMode::Graph: return "graph";
  }
  return "?";
}

ExecMode resolve_exec_mode(ExecMode requested, const char* env, const Schedule& s) {
  ExecMode mode = requested;
  if (mode == ExecMode::Auto && env) {  // the environment never overrides an explicit mode
    const std::string e = env;
    if (e == "perop") mode = ExecMode::PerOp;
    else if (e == "graph") mode = ExecMode::Graph;
    else RLX_CHECK(e == "auto", "RLX_EXEC='" << e << "': expected perop, graph or auto");
  }
  const Thunk* unsafe = nullptr;
  for (const Thunk& t : s.thunks)
    if (!t.capture_safe && !unsafe) unsafe = &t;
  if (mode == ExecMode::Auto) mode = unsafe ? ExecMode::PerOp : ExecMode::Graph;
  RLX_CHECK(!(mode == ExecMode::Graph && unsafe),
            "graph mode: thunk " << unsafe->label << " cannot be recorded (not capture-safe); use perop");
  return mode;
}

}  // namespace rlx
