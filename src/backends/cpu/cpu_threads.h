// How many threads the CPU backend runs by default.
#pragma once

namespace rlx::cpu {

// OMP_NUM_THREADS when it is set; otherwise the physical cores this process
// may run on (hyperthread siblings share one core's vector units, so a second
// thread per core only adds contention to GEMM-bound work).
int default_threads();

}  // namespace rlx::cpu
