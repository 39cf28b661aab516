// How to compile: the options every layer may read. Ground floor: includes
// nothing of rlx, so the compiler and the backends take options without
// depending on the session API (rlx/session.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rlx {

enum class Device { Auto, Cpu, Cuda };

// Executables compiled with one ArenaShare use one arena on one device. The
// first one compiled sizes it, so compile the largest shape first; the others
// must fit and lay out their params identically (the same graph builder at
// other batch or sequence sizes), so params set through any of them are set
// for all. Runs of executables sharing an arena must not overlap in time.
// reserve_bytes: the least the arena will be (see planned_arena_bytes).
class ArenaShare;
std::shared_ptr<ArenaShare> make_arena_share(uint64_t reserve_bytes = 0);

// CUDA execution: each thunk launched on a stream (PerOp), or the whole
// forward recorded once as a CUDA graph and replayed (Graph). Auto: the
// RLX_EXEC environment variable if set, else Graph when every thunk can be
// recorded, else PerOp. An explicit mode is never overridden by the environment.
enum class ExecMode { Auto, PerOp, Graph };

// Ranks that sum tensors together (the graph's all_reduce and all_gather
// nodes): the tensor-parallel group an executable belongs to. On the CPU
// the ranks are threads of this process (each runs its executable on its
// own thread, at the same time as the others); on CUDA one GPU a rank over
// NCCL (devices: each rank's GPU; empty: 0 .. ranks-1). rlx::Error where
// the device cannot.
class Collective;
std::shared_ptr<Collective> make_collective(Device device, int ranks, std::vector<int> devices = {});

struct CompileOptions {
  Device device = Device::Cpu;
  bool fuse = true;                // run the fusion passes
  ExecMode mode = ExecMode::Auto;  // CUDA only
  int threads = 0;                 // CPU threads, 0 = all cores
  int ring = 4;                    // CUDA: in-flight slots for submit/wait
  std::string trace_json;          // CUDA: write a Chrome trace of per-thunk GPU times here
  std::shared_ptr<ArenaShare> arena_share;  // see make_arena_share()
  bool allow_tf32 = false;         // CUDA: f32 matmuls may round inputs to TF32 (faster, ~1e-3 error)
  bool verify_plan = false;        // prove the memory plan at compile (always on in debug builds)
  // CPU: products over weights in int8 (weights quantized per output column
  // when first packed, activations per row; AVX512-VNNI, else compile
  // fails); ~1e-2 relative error per product. The CUDA backend refuses it.
  bool int8_products = false;
  int device_index = 0;            // CUDA: which GPU the arena and the runs live on
  // Tensor parallelism: this executable is rank `rank` of `collective`, and
  // its all_reduce nodes sum with the other ranks' (every rank runs a graph
  // built alike). Null: one rank, an all_reduce is a copy.
  std::shared_ptr<Collective> collective;
  int rank = 0;
};

}  // namespace rlx
