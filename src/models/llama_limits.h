// The largest decoder sizes rlx reads from a config or a GGUF. They lie well
// past every released checkpoint (Llama 3.1 405B: 126 layers, 16384 hidden,
// 53248 intermediate, 128 heads; vocabularies to 256k; contexts to 10M) and
// stop a hostile file from sizing a graph or an allocation without bound
// before its tensors are checked.
#pragma once
#include <cfloat>

namespace rlx {

struct LlamaLimits {
  int layers = 1024;
  int hidden_size = 1 << 17;
  int intermediate_size = 1 << 20;
  int heads = 4096;
  int head_dim = 4096;
  int vocab = 1 << 24;
  int positions = 1 << 24;
  // Norm epsilon in (0, 1); rope theta > 0 and finite as a float.
  double min_eps = FLT_TRUE_MIN, max_eps = 1.0 - FLT_EPSILON;
  double min_theta = FLT_MIN, max_theta = FLT_MAX;
  // rope scaling factors.
  double min_factor = 1e-6, max_factor = 1e6;
};

}  // namespace rlx
