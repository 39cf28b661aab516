#include "backends/cpu/cpu_threads.h"

#include <omp.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace rlx::cpu {
namespace {

int read_int(const std::string& path) {
  std::ifstream in(path);
  int v = -1;
  in >> v;
  return in ? v : -1;
}

int physical_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  std::set<std::pair<int, int>> cores;  // (package, core) of every CPU we may run on
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const int core = read_int(dir + "core_id"), package = read_int(dir + "physical_package_id");
    if (core < 0 || package < 0) return 0;  // no topology: let the caller fall back
    cores.emplace(package, core);
  }
  return int(cores.size());
}

}  // namespace

int default_threads() {
  static const int n = [] {
    if (std::getenv("OMP_NUM_THREADS")) return omp_get_max_threads();
    const int cores = physical_cores();
    return cores > 0 ? cores : omp_get_num_procs();
  }();
  return n;
}

}  // namespace rlx::cpu
