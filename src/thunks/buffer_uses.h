// The arena bytes a thunk's kernel reads and writes, declared by the thunk
// from its own params (as XLA's thunks list their buffer uses), not derived
// from the graph. The plan verifier checks these declarations against the
// memory plan and against the bytes the thunk's graph node owns.
#pragma once
#include <vector>

#include "thunks/thunk.h"

namespace rlx {

std::vector<BufferUse> declared_uses(const ThunkParams& p);

}  // namespace rlx
