#include "backends/cpu/cpu_vec_math.h"

namespace rlx::cpu {

const char* cpu_vector_isa() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(RLX_NO_CPU_CLONES)
#if defined(__clang__)
  // Clang does not take level names here: test the levels' defining features.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "x86-64-v4";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
    return "x86-64-v3";
#else
  // The same test, in the same order, as the resolver of RLX_CPU_CLONES.
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3";
#endif
#endif
  return "default";
}

}  // namespace rlx::cpu
