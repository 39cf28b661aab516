#include "backends/cpu/cpu_vec_math.h"

namespace rlx::cpu {

const char* cpu_vector_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  // The same test, in the same order, as the resolver of RLX_CPU_CLONES.
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3";
#endif
  return "default";
}

}  // namespace rlx::cpu
