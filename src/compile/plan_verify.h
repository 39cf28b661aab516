// Proves a schedule's memory plan: no two scratch values live at the same
// time overlap; the reads and writes every thunk declares from its own params
// (thunks/buffer_uses.h) stay inside the arena, inside slots (params, inputs,
// outputs or a live scratch value) and inside what its graph node owns.
// compile() runs it in debug builds and when CompileOptions::verify_plan.
#pragma once
#include "thunks/thunk.h"

namespace rlx {

void verify_plan(const Schedule& s);  // throws rlx::Error describing the violation

}  // namespace rlx
