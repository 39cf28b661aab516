// A one-row matrix-vector product whose weights stream through shared
// memory by the bulk-copy engine: one block an SM loops over tiles of whole
// weight rows, with several tiles' copies in flight at once (mbarrier
// completion), so the bytes in flight no longer depend on registers, and a
// constant weight's first tiles are requested before the kernel waits for
// the one before it (programmatic dependent launch). x (normed) is held in
// registers for the whole launch. RLX_GEMV_STREAM=1 / 0 turns it on / off
// for the products it accepts (read per launch); kGemvStreamByDefault is the
// default.
#pragma once
#include <cstdint>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

// Off: measured 0.55x of the register kernels at f16 batch 1 on the H100
// (PERF.md, "Weights streamed through shared memory").
constexpr bool kGemvStreamByDefault = false;

bool gemv_stream_enabled();
// One row of x over one contiguous constant f16/bf16 weight [n, k] (k up
// to 16384), any fusion; the arena's offsets as gemv_eligible checks them.
bool gemv_stream_accepts(const MatMulParams& p);
void run_gemv_stream(const MatMulParams& p, const LaunchContext& ctx);
// Launches so far (tests assert the path ran).
int64_t gemv_stream_launches();

}  // namespace rlx::cuda
