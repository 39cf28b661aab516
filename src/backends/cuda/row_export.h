// Rows of an output gathered out of the arena into caller-owned device
// memory as f32 (embeddings handed to torch through DLPack without a trip
// through the host): one block per row, the L2 norm reduced in the block.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "rlx/dtype.h"

namespace rlx::cuda {

// Row i of src ([rows, src_cols] of dt) to row dst_rows[i] of dst
// ([*, dim] f32; dst_rows in device memory), its first dim values,
// divided by max(||row[:dim]||, 1e-12) when normalize is set.
void export_rows_f32(const void* src, DType dt, int64_t src_cols, const int32_t* dst_rows, int rows, int dim,
                     bool normalize, float* dst, cudaStream_t stream);

}  // namespace rlx::cuda
