// Runs a schedule once on the CPU backend and returns its outputs' bytes.
// The compiler's way to evaluate constant subgraphs (fold_constants) without
// calling compile(), which stands above both the compiler and the backends.
#pragma once
#include <cstdint>
#include <vector>

#include "thunks/thunk.h"

namespace rlx {

// inputs: host bytes per input binding, in binding order. The schedule must
// have no params. One thread, no fusion concerns: the schedule is as given.
std::vector<std::vector<uint8_t>> evaluate_on_cpu(const Schedule& s, const std::vector<const void*>& inputs);

}  // namespace rlx
