// One f32 row of LayerNorm / RMSNorm, shared by the norm thunk and the
// products that fuse the RMSNorm before them (cpu_matvec_fusion.h): a decode
// step of few rows (norm fused) and a batch of many (norm apart) then give
// the same bits, so a sequence decodes the same alone as in a batch.
#pragma once
#include <cstdint>

namespace rlx::cpu {

// v = x (+ res), written to sum_out if given; out = norm(v), scaled by gamma
// and shifted by beta where given. out may be x.
void norm_row_f32(const float* x, const float* res, const float* gamma, const float* beta, float* out,
                  float* sum_out, int64_t cols, bool layer, float eps);

}  // namespace rlx::cpu
