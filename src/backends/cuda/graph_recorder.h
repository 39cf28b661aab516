// Recording work into CUDA graphs. A RecordedThunk is a command-buffer thunk
// (as in XLA's GPU runtime): a sequence of work, captured once from the same
// per-op launch code, replayed by one graph launch. The recorded sequence is
// whatever the enqueue function puts on the stream, so recording can never
// disagree with per-op execution.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "backends/cuda/device_thunk.h"

namespace rlx::cuda {

// Records what `enqueue` puts on `stream` (nothing runs); on an error the
// capture is ended so the stream stays usable.
cudaGraph_t capture(cudaStream_t stream, const std::function<void()>& enqueue, const std::string& what);

struct GraphNodes {
  int kernels = 0, memcpys = 0;
};
GraphNodes count_nodes(cudaGraph_t g);

class RecordedThunk final : public DeviceThunk {
 public:
  // Captures `enqueue` on `stream`, instantiates and uploads the graph.
  RecordedThunk(cudaStream_t stream, const std::function<void()>& enqueue, const std::string& what);
  ~RecordedThunk() override;
  RecordedThunk(const RecordedThunk&) = delete;
  RecordedThunk& operator=(const RecordedThunk&) = delete;

  void execute(const LaunchContext& ctx) const override;  // one cudaGraphLaunch
  const GraphNodes& nodes() const { return nodes_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
  GraphNodes nodes_;
  std::string what_;
};

}  // namespace rlx::cuda
