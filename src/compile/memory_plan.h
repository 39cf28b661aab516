// Liveness-based placement of scratch values in one region: first fit by
// offset among slots not live at the same time; 256-byte alignment.
#pragma once
#include <cstdint>
#include <vector>

namespace rlx {

constexpr uint64_t kAlign = 256;
inline uint64_t align_up(uint64_t x, uint64_t a = kAlign) { return (x + a - 1) / a * a; }

struct LiveRange {
  uint64_t size = 0;
  int32_t first = 0, last = 0;  // inclusive, in schedule steps
};

struct Placement {
  std::vector<uint64_t> offsets;  // one per range, from the region start
  uint64_t region_bytes = 0;
  uint64_t peak_live_bytes = 0;
};

Placement place(const std::vector<LiveRange>& ranges);

}  // namespace rlx
