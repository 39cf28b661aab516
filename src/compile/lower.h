// Lowering: a (passed) graph -> a schedule of thunks over one planned arena.
#pragma once
#include <functional>
#include <memory>

#include "rlx/graph.h"
#include "thunks/thunk.h"

namespace rlx {

std::unique_ptr<Schedule> lower(const Graph& g);

// Emits the thunks of one compute node; `addr` gives a value's arena offset.
// Views and leaves emit nothing; lower.cc skips grouped params. How many
// thunks a node takes is whatever this emits (lower.cc counts, never predicts).
void lower_node(const Graph& g, int32_t node, const std::function<uint64_t(ValueId)>& addr,
                std::vector<Thunk>& out);
// A Concat of Params that nothing else reads: its inputs are placed inside
// its slot, so set_param by the original names fills the concatenation.
bool is_param_group(const Graph& g, const Node& n);
// Reshape, and a narrow that is one contiguous run: alias their input.
bool is_view(const Graph& g, int32_t node);

// Contiguous row-major strides (elements) of a shape.
std::vector<int64_t> contiguous_strides(const Shape& s);

}  // namespace rlx
