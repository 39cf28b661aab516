#include "backends/cuda/graph_recorder.h"

#include <vector>

#include "backends/cuda/cuda_check.h"

namespace rlx::cuda {

cudaGraph_t capture(cudaStream_t stream, const std::function<void()>& enqueue, const std::string& what) {
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture begin");
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  cudaGraph_t g = nullptr;
  check(cudaStreamEndCapture(stream, &g), what);
  return g;
}

GraphNodes count_nodes(cudaGraph_t g) {
  size_t n = 0;
  check(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) check(cudaGraphGetNodes(g, nodes.data(), &n), "cudaGraphGetNodes");
  GraphNodes c;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    check(cudaGraphNodeGetType(node, &t), "cudaGraphNodeGetType");
    if (t == cudaGraphNodeTypeKernel) ++c.kernels;
    if (t == cudaGraphNodeTypeMemcpy) ++c.memcpys;
  }
  return c;
}

RecordedThunk::RecordedThunk(cudaStream_t stream, const std::function<void()>& enqueue, const std::string& what)
    : what_(what) {
  cudaGraph_t g = capture(stream, enqueue, what);
  nodes_ = count_nodes(g);
  cudaError_t e = cudaGraphInstantiate(&exec_, g, 0);
  cudaGraphDestroy(g);
  check(e, "instantiating " + what);
  check(cudaGraphUpload(exec_, stream), "uploading " + what);
}

RecordedThunk::~RecordedThunk() {
  if (exec_) cudaGraphExecDestroy(exec_);
}

void RecordedThunk::execute(const LaunchContext& ctx) const {
  check(cudaGraphLaunch(exec_, ctx.stream), "launching " + what_);
}

}  // namespace rlx::cuda
