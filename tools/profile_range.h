// Marks a stretch of host code for a profiler such as
// `ncu --nvtx --nvtx-include "rlx bench graph/"`; free when none is attached.
#pragma once
#include <string>
#if RLX_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

struct ProfileRange {
  explicit ProfileRange([[maybe_unused]] const std::string& name) {
#if RLX_NVTX
    nvtxRangePushA(name.c_str());
#endif
  }
  ~ProfileRange() {
#if RLX_NVTX
    nvtxRangePop();
#endif
  }
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;
};
