#include "backends/staging_ring.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "rlx/error.h"

namespace rlx {
namespace {

uint64_t pack(const std::vector<uint64_t>& bytes, std::vector<uint64_t>& offsets) {
  uint64_t top = 0;
  for (uint64_t b : bytes) {
    offsets.push_back(top);
    top = (top + b + 255) / 256 * 256;
  }
  return std::max<uint64_t>(top, 256);
}

}  // namespace

StagingRing::StagingRing(std::vector<uint64_t> input_bytes, std::vector<uint64_t> output_bytes, int slots,
                         Alloc alloc, Free free)
    : in_bytes_(std::move(input_bytes)), out_bytes_(std::move(output_bytes)), free_(std::move(free)) {
  in_total_ = pack(in_bytes_, in_offsets_);
  out_total_ = pack(out_bytes_, out_offsets_);
  slots_.resize(size_t(std::max(1, slots)));
  for (Slot& s : slots_) {
    s.in = alloc(in_total_);
    s.out = alloc(out_total_);
    RLX_CHECK(s.in && s.out, "staging ring: cannot allocate " << in_total_ + out_total_ << " bytes of staging");
  }
}

StagingRing::~StagingRing() {
  for (Slot& s : slots_) {
    if (s.in) free_(s.in);
    if (s.out) free_(s.out);
  }
}

uint64_t StagingRing::begin(const Finish& finish, size_t* slot) {
  const uint64_t ticket = next_ticket_++;
  *slot = size_t(ticket % slots_.size());
  Slot& s = slots_[*slot];
  if (s.pending) {  // its last run was never waited for: keep that run's outputs
    finish(*slot);
    parked_[s.pending] = std::vector<uint8_t>(s.out, s.out + out_total_);
  }
  s.pending = ticket;
  return ticket;
}

void StagingRing::stage_inputs(size_t slot, const std::vector<const void*>& inputs) {
  RLX_CHECK(inputs.size() == in_bytes_.size(),
            "run: expected " << in_bytes_.size() << " inputs, got " << inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) std::memcpy(input(slot, i), inputs[i], in_bytes_[i]);
}

void StagingRing::collect(uint64_t ticket, const Finish& finish, const std::vector<void*>& outputs) {
  RLX_CHECK(outputs.size() == out_bytes_.size(),
            "wait: expected " << out_bytes_.size() << " outputs, got " << outputs.size());
  auto it = parked_.find(ticket);
  if (it != parked_.end()) {
    for (size_t i = 0; i < outputs.size(); ++i)
      std::memcpy(outputs[i], it->second.data() + out_offsets_[i], out_bytes_[i]);
    parked_.erase(it);
    return;
  }
  const size_t slot = size_t(ticket % slots_.size());
  RLX_CHECK(ticket != 0 && slots_[slot].pending == ticket, "wait: run " << ticket << " is not in flight");
  finish(slot);
  for (size_t i = 0; i < outputs.size(); ++i) std::memcpy(outputs[i], output(slot, i), out_bytes_[i]);
  slots_[slot].pending = 0;
}

}  // namespace rlx
