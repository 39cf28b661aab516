// Pipelined runs' host side: a ring of slots, each holding one run's inputs
// and outputs packed contiguously (each binding 256-byte aligned), and the
// tickets saying which run is in which slot. A run whose slot is needed again
// before it was waited for has its outputs parked on the host, so every
// ticket can be waited for exactly once, in any order. Memory comes from the
// backend (pinned on CUDA, plain on the CPU); waiting for the device is the
// backend's `finish(slot)`. Host-only, so the CPU suite tests it.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace rlx {

class StagingRing {
 public:
  using Alloc = std::function<uint8_t*(size_t)>;
  using Free = std::function<void(uint8_t*)>;
  using Finish = std::function<void(size_t slot)>;

  StagingRing(std::vector<uint64_t> input_bytes, std::vector<uint64_t> output_bytes, int slots, Alloc alloc,
              Free free);
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // Starts a run: returns its ticket and (in *slot) the slot it runs in. If
  // that slot still holds a run nobody waited for, finish(slot) is called and
  // that run's outputs are parked first.
  uint64_t begin(const Finish& finish, size_t* slot);
  // Copies host inputs (one pointer per input binding) into the slot.
  void stage_inputs(size_t slot, const std::vector<const void*>& inputs);
  // The outputs of `ticket` into `outputs` (one pointer per output binding):
  // from the parked copy, or from its slot after finish(slot). Throws for a
  // ticket not in flight (unknown, or already waited for).
  void collect(uint64_t ticket, const Finish& finish, const std::vector<void*>& outputs);

  size_t slots() const { return slots_.size(); }
  uint8_t* input(size_t slot, size_t binding) const { return slots_[slot].in + in_offsets_[binding]; }
  uint8_t* output(size_t slot, size_t binding) const { return slots_[slot].out + out_offsets_[binding]; }
  uint64_t pending(size_t slot) const { return slots_[slot].pending; }
  size_t parked() const { return parked_.size(); }

 private:
  struct Slot {
    uint8_t* in = nullptr;
    uint8_t* out = nullptr;
    uint64_t pending = 0;  // ticket in flight and not yet waited for; 0 = free
  };
  std::vector<uint64_t> in_bytes_, out_bytes_, in_offsets_, out_offsets_;
  uint64_t in_total_ = 0, out_total_ = 0;
  std::vector<Slot> slots_;
  std::map<uint64_t, std::vector<uint8_t>> parked_;  // outputs of slots reused before wait
  uint64_t next_ticket_ = 1;
  Free free_;
};

}  // namespace rlx
