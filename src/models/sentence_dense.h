// sentence-transformers' Dense module (after pooling, before Normalize):
// y = activation(W x + b), read from its folder's config.json and
// model.safetensors, applied on the host to each pooled vector.
#pragma once
#include <string>
#include <vector>

namespace rlx {

class SentenceDense {
 public:
  // `dir` is the module's folder (e.g. <model>/2_Dense).
  explicit SentenceDense(const std::string& dir);
  int in_features() const { return in_; }
  int out_features() const { return out_; }
  std::vector<float> apply(const std::vector<float>& x) const;

 private:
  enum class Act { Identity, Tanh, Relu, Sigmoid, Gelu };
  int in_ = 0, out_ = 0;
  Act act_ = Act::Identity;
  std::vector<float> w_, b_;  // w_: [out, in]
};

}  // namespace rlx
