// Proves a schedule's memory plan: no two scratch values live at the same
// time overlap; every thunk's declared reads and writes stay inside the
// arena and inside slots (params, inputs, outputs or a live scratch value).
#pragma once
#include "thunks/thunk.h"

namespace rlx {

void verify_plan(const Schedule& s);  // throws rlx::Error describing the violation

}  // namespace rlx
