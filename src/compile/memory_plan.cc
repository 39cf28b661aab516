#include "compile/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace rlx {

Placement place(const std::vector<LiveRange>& ranges) {
  Placement p;
  p.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  // Larger values first among those born at the same step packs tighter.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].first != ranges[b].first) return ranges[a].first < ranges[b].first;
    return ranges[a].size > ranges[b].size;
  });
  struct Live { uint64_t off, size; int32_t last; };
  std::vector<Live> live;  // kept sorted by offset
  uint64_t live_bytes = 0;
  for (size_t idx : order) {
    const LiveRange& r = ranges[idx];
    for (auto it = live.begin(); it != live.end();) {
      if (it->last < r.first) { live_bytes -= it->size; it = live.erase(it); }
      else ++it;
    }
    uint64_t need = align_up(std::max<uint64_t>(r.size, 1)), off = 0;
    auto pos = live.begin();
    for (; pos != live.end(); ++pos) {
      if (off + need <= pos->off) break;
      off = std::max(off, align_up(pos->off + pos->size));
    }
    live.insert(pos, Live{off, need, r.last});
    live_bytes += need;
    p.offsets[idx] = off;
    p.region_bytes = std::max(p.region_bytes, off + need);
    p.peak_live_bytes = std::max(p.peak_live_bytes, live_bytes);
  }
  return p;
}

}  // namespace rlx
