// Which execution mode a GPU executable runs in. Host-only (the CPU suite
// tests it): an explicit CompileOptions::mode is used as given; Auto takes
// RLX_EXEC when it is set, else one recorded graph when every thunk can be
// recorded (capture-safe), else per op.
#pragma once
#include "rlx/options.h"
#include "thunks/thunk.h"

namespace rlx {

// env: the value of RLX_EXEC or nullptr. Throws rlx::Error when env names no
// mode, or when graph mode is asked for and a thunk cannot be recorded (the
// error names the thunk).
ExecMode resolve_exec_mode(ExecMode requested, const char* env, const Schedule& s);
const char* exec_mode_name(ExecMode m);  // "auto", "perop", "graph"

}  // namespace rlx
