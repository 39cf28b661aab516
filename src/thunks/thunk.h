// A lowered schedule: thunks over one arena, plus the bindings of params,
// inputs and outputs. Produced by compile/lower.cc, run by a backend.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "rlx/graph.h"
#include "thunks/params.h"

namespace rlx {

enum class ThunkKind : uint8_t {
#define X(e, n, P) e,
#include "thunks/thunks.def"
#undef X
};
constexpr int kNumThunkKinds = 0
#define X(e, n, P) +1
#include "thunks/thunks.def"
#undef X
    ;
const char* thunk_name(ThunkKind k);

using ThunkParams = std::variant<
#define X(e, n, P) P,
#include "thunks/thunks.def"
#undef X
    std::monostate>;

struct BufferUse {
  uint64_t offset = 0, size = 0;
  bool write = false;
};

struct Thunk {
  ThunkKind kind;
  ThunkParams params;
  std::vector<BufferUse> uses;  // every arena byte range read or written
  bool capture_safe = true;     // no host sync, allocation or host reads
  int32_t node = -1;            // graph node it came from
  std::string label;            // "matmul 'l0.qkv'"
  DType dtype() const;          // compute dtype, for backend support checks
};

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

struct Schedule {
  std::vector<Thunk> thunks;
  std::vector<PlannedValue> planned;  // scratch values only
  uint64_t arena_bytes = 0;
  Region params, inputs, outputs, scratch;
  std::vector<Binding> param_bindings, input_bindings, output_bindings;
  std::vector<std::pair<uint64_t, std::shared_ptr<const std::vector<uint8_t>>>> constants;
  std::vector<IndexCheck> index_checks;
  uint64_t peak_live_bytes = 0;     // max over time of live scratch bytes
  uint64_t intermediate_bytes = 0;  // sum of all scratch values, no reuse

  std::map<std::string, int> histogram() const;
  std::string to_string() const;  // one line per thunk
};

}  // namespace rlx
