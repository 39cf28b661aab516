#include "compile/plan_verify.h"

#include <algorithm>

#include "thunks/buffer_uses.h"

namespace rlx {

namespace {

bool inside(uint64_t off, uint64_t size, uint64_t lo, uint64_t hi) {
  return off >= lo && off + size <= hi;
}

}  // namespace

void verify_plan(const Schedule& s) {
  const auto& pv = s.planned;
  for (const PlannedValue& p : pv) {
    RLX_CHECK(p.offset % 256 == 0, "plan: value " << p.value << " at unaligned offset " << p.offset);
    RLX_CHECK(inside(p.offset, p.size, s.scratch.offset, s.scratch.offset + s.scratch.size),
              "plan: value " << p.value << " lies outside the scratch region");
    RLX_CHECK(p.first <= p.last, "plan: value " << p.value << " has an empty live range");
  }
  // Sweep by offset: values that overlap in bytes must not overlap in time.
  std::vector<size_t> idx(pv.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return pv[a].offset < pv[b].offset; });
  for (size_t i = 0; i < idx.size(); ++i) {
    const PlannedValue& a = pv[idx[i]];
    for (size_t j = i + 1; j < idx.size() && pv[idx[j]].offset < a.offset + a.size; ++j) {
      const PlannedValue& b = pv[idx[j]];
      bool time = a.first <= b.last && b.first <= a.last;
      RLX_CHECK(!time, "plan: values " << a.value << " and " << b.value
                                       << " share bytes while both live (steps " << a.first << "-"
                                       << a.last << " and " << b.first << "-" << b.last << ")");
    }
  }
  RLX_CHECK(s.state.offset + s.state.size <= s.params.offset || !s.state.size,
            "plan: the state region overlaps the params region");
  for (const Binding& b : s.state_bindings)
    RLX_CHECK(inside(b.offset, b.bytes(), s.state.offset, s.state.offset + s.state.size),
              "plan: state '" << b.name << "' lies outside the state region");
  // A state update is a copy of exactly its state's bytes, and nothing after
  // it touches that state: the run saw the old value throughout.
  std::vector<const Binding*> update_target(s.thunks.size(), nullptr);
  for (const StateUpdate& su : s.state_updates) {
    RLX_CHECK(su.thunk >= 0 && size_t(su.thunk) < s.thunks.size(),
              "plan: the update of state '" << su.state << "' names thunk " << su.thunk << " of " << s.thunks.size());
    const Thunk& th = s.thunks[size_t(su.thunk)];
    const Binding* target = nullptr;
    for (const Binding& b : s.state_bindings)
      if (b.name == su.state) target = &b;
    RLX_CHECK(target, "plan: thunk " << su.thunk << " (" << th.label << ") updates unknown state '" << su.state << "'");
    RLX_CHECK(!update_target[size_t(su.thunk)], "plan: thunk " << su.thunk << " (" << th.label
                                                                << ") updates two states");
    RLX_CHECK(th.kind() == ThunkKind::Copy, "plan: thunk " << su.thunk << " (" << th.label << ") updates state '"
                                                           << su.state << "' but is not a copy");
    for (const StateUpdate& other : s.state_updates)
      RLX_CHECK(&other == &su || other.state != su.state, "plan: state '" << su.state << "' has two updates");
    for (const BufferUse& u : declared_uses(th.params))
      RLX_CHECK(!u.write || (u.offset == target->offset && u.size == target->bytes()),
                "plan: thunk " << su.thunk << " (" << th.label << ") writes bytes [" << u.offset << ", "
                               << u.offset + u.size << ") that are not exactly state '" << su.state << "'");
    for (size_t t = size_t(su.thunk) + 1; t < s.thunks.size(); ++t) {
      std::vector<BufferUse> all = declared_uses(s.thunks[t].params);
      all.insert(all.end(), s.thunks[t].uses.begin(), s.thunks[t].uses.end());
      for (const BufferUse& u : all)
        RLX_CHECK(u.offset + u.size <= target->offset || u.offset >= target->offset + target->bytes(),
                  "plan: thunk " << t << " (" << s.thunks[t].label << ") touches state '" << su.state
                                 << "' after its update (thunk " << su.thunk << ")");
    }
    update_target[size_t(su.thunk)] = target;
  }
  const Region regions[] = {s.state, s.params, s.inputs, s.outputs};
  for (size_t t = 0; t < s.thunks.size(); ++t) {
    const Thunk& th = s.thunks[t];
    const std::vector<BufferUse> declared = declared_uses(th.params);
    RLX_CHECK(!declared.empty(), "plan: thunk " << t << " (" << th.label << ") declares no buffers");
    for (const BufferUse& u : declared) {
      // What the kernel touches must be bytes its graph node reads or writes.
      bool owned = th.uses.empty();
      for (const BufferUse& n : th.uses)
        owned = owned || (n.write == u.write && inside(u.offset, u.size, n.offset, n.offset + n.size));
      RLX_CHECK(owned, "plan: thunk " << t << " (" << th.label << ") " << (u.write ? "writes" : "reads")
                                      << " bytes [" << u.offset << ", " << u.offset + u.size
                                      << ") that its node does not " << (u.write ? "write" : "read"));
    }
    // Both the kernel's declarations and the node's uses must lie in live slots.
    for (const std::vector<BufferUse>* uses : {&declared, &th.uses}) {
      for (const BufferUse& u : *uses) {
        RLX_CHECK(u.offset + u.size <= s.arena_bytes,
                  "plan: thunk " << t << " (" << th.label << ") touches bytes past the arena");
        bool ok = false;
        for (const Region& r : regions) ok = ok || inside(u.offset, u.size, r.offset, r.offset + r.size);
        if (u.write && inside(u.offset, u.size, s.params.offset, s.params.offset + s.params.size) &&
            s.params.size)
          RLX_FAIL("plan: thunk " << t << " (" << th.label << ") writes into the params region");
        // State outlives the run: only a KV write or a state update (its own
        // state's bytes, checked above) may change it.
        if (u.write && s.state.size && u.offset < s.state.offset + s.state.size &&
            u.offset + u.size > s.state.offset && th.kind() != ThunkKind::KvWrite) {
          const Binding* b = update_target[t];
          if (!b || u.offset != b->offset || u.size != b->bytes())
            RLX_FAIL("plan: thunk " << t << " (" << th.label
                                    << ") writes into the state region; only kv_write and state updates may");
        }
        for (const PlannedValue& p : pv)
          ok = ok || (int32_t(t) >= p.first && int32_t(t) <= p.last &&
                      inside(u.offset, u.size, p.offset, p.offset + p.size));
        RLX_CHECK(ok, "plan: thunk " << t << " (" << th.label << ") " << (u.write ? "writes" : "reads")
                                     << " bytes [" << u.offset << ", " << u.offset + u.size
                                     << ") outside every live slot");
      }
    }
  }
}

}  // namespace rlx
