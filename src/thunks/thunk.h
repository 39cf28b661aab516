// A lowered schedule: thunks over one arena, plus the bindings of params,
// inputs and outputs. Produced by compile/lower.cc, run by a backend.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "rlx/graph.h"
#include "thunks/params.h"

namespace rlx {

const char* thunk_name(ThunkKind k);

// One alternative per thunk kind, in thunks.def order: the variant's index is
// the kind, so a thunk's kind cannot disagree with its params.
template <class First, class... P> struct VariantOfRest { using type = std::variant<P...>; };
using ThunkParams = VariantOfRest<void
#define X(e, n, P) , P
#include "thunks/thunks.def"
#undef X
                                  >::type;
#define X(e, n, P)                                                                              \
  static_assert(std::is_same_v<std::variant_alternative_t<size_t(ThunkKind::e), ThunkParams>, P>, #P " out of order");
#include "thunks/thunks.def"
#undef X

struct BufferUse {
  uint64_t offset = 0, size = 0;
  bool write = false;
};

struct Thunk {
  ThunkParams params;
  std::vector<BufferUse> uses;  // every arena byte range read or written
  bool capture_safe = true;     // no host sync, allocation or host reads
  int32_t node = -1;            // graph node it came from
  std::string label;            // "matmul 'l0.qkv'"
  ThunkKind kind() const { return ThunkKind(params.index()); }
  DType dtype() const;  // dtype_of(params): the registry key
};

DType dtype_of(const ThunkParams& p);

// Where a named tensor lives. Params inside a concatenated group are strided:
// `outer` runs of `inner_bytes`, `outer_stride_bytes` apart, from `offset`.
struct Binding {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  uint64_t offset = 0;
  int64_t outer = 1;
  uint64_t inner_bytes = 0, outer_stride_bytes = 0;
  uint64_t bytes() const { return uint64_t(outer) * inner_bytes; }
};

struct Region {
  uint64_t offset = 0, size = 0;
};

// An i32 input whose values must lie in [0, limit): checked on the host.
struct IndexCheck {
  std::string input;
  int64_t limit = 0;
  std::string what;  // "token ids of gather 'embeddings'"
};

// A scratch value's slot and its live range in thunk indices [first, last].
// Views share their parent's slot. Kept for the plan verifier and reports.
struct PlannedValue {
  ValueId value = -1;
  uint64_t offset = 0, size = 0;
  int32_t first = 0, last = 0;
};

// A state's value for the next run, copied into its slot by `thunk` (a copy
// after every thunk that touches the state); see Graph::update_state.
struct StateUpdate {
  int32_t thunk = -1;
  std::string state;  // the state binding's name
};

struct Schedule {
  std::vector<Thunk> thunks;
  std::vector<PlannedValue> planned;  // scratch values only
  uint64_t arena_bytes = 0;
  // state (first, so every graph of one builder places it alike) | params +
  // constants | inputs | outputs | scratch.
  Region state, params, inputs, outputs, scratch;
  std::vector<Binding> state_bindings, param_bindings, input_bindings, output_bindings;
  std::vector<std::pair<uint64_t, std::shared_ptr<const std::vector<uint8_t>>>> constants;
  std::vector<IndexCheck> index_checks;
  std::vector<StateUpdate> state_updates;
  uint64_t peak_live_bytes = 0;     // max over time of live scratch bytes
  uint64_t intermediate_bytes = 0;  // sum of all scratch values, no reuse

  std::map<std::string, int> histogram() const;
  std::string to_string() const;  // one line per thunk
};

}  // namespace rlx
