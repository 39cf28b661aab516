#include "models/sentence_dense.h"

#include <cmath>
#include <filesystem>

#include "models/json_read.h"
#include "models/safetensors.h"
#include "rlx/error.h"

namespace rlx {
namespace fs = std::filesystem;

SentenceDense::SentenceDense(const std::string& dir) {
  const fs::path cfg = fs::path(dir) / "config.json";
  nlohmann::json doc = read_json_file(cfg);
  JsonField j(doc, cfg.string());
  j.object();
  in_ = int(j.at("in_features").integer(1, 1 << 16));
  out_ = int(j.at("out_features").integer(1, 1 << 16));
  const bool bias = j.boolean_or("bias", true);
  // Written as a class path, e.g. "torch.nn.modules.activation.Tanh".
  std::string act = j.string_or("activation_function", "torch.nn.modules.activation.Tanh");
  std::string last = act.substr(act.rfind('.') == std::string::npos ? 0 : act.rfind('.') + 1);
  if (last == "Identity") act_ = Act::Identity;
  else if (last == "Tanh") act_ = Act::Tanh;
  else if (last == "ReLU") act_ = Act::Relu;
  else if (last == "Sigmoid") act_ = Act::Sigmoid;
  else if (last == "GELU") act_ = Act::Gelu;
  else RLX_FAIL(j.where() << "activation_function '" << act << "' is not supported");
  const fs::path st = fs::path(dir) / "model.safetensors";
  RLX_CHECK(fs::exists(st), "'" << dir << "': the Dense module has no model.safetensors (a pytorch_model.bin "
                                   "is not read: save the model again with safe_serialization)");
  SafetensorsFile f(st.string());
  RLX_CHECK(f.has("linear.weight"), "'" << st.string() << "' has no tensor 'linear.weight'");
  const SafetensorInfo& wi = f.info("linear.weight");
  RLX_CHECK(wi.shape == (Shape{out_, in_}), "'" << st.string() << "', tensor 'linear.weight' has shape "
                                                << shape_str(wi.shape) << ", config.json needs ["
                                                << out_ << ", " << in_ << "]");
  w_ = f.to_f32("linear.weight");
  if (bias) {
    RLX_CHECK(f.has("linear.bias") && f.info("linear.bias").shape == (Shape{out_}),
              "'" << st.string() << "': tensor 'linear.bias' is absent or not [" << out_ << "]");
    b_ = f.to_f32("linear.bias");
  } else {
    b_.assign(size_t(out_), 0.f);
  }
}

std::vector<float> SentenceDense::apply(const std::vector<float>& x) const {
  RLX_CHECK(int(x.size()) == in_, "Dense module: input of " << x.size() << " values, expected " << in_);
  std::vector<float> y(static_cast<size_t>(out_));
  for (size_t o = 0; o < y.size(); ++o) {
    double acc = b_[o];
    const float* row = w_.data() + o * size_t(in_);
    for (size_t i = 0; i < size_t(in_); ++i) acc += double(row[i]) * x[i];
    switch (act_) {
      case Act::Identity: break;
      case Act::Tanh: acc = std::tanh(acc); break;
      case Act::Relu: acc = std::max(acc, 0.0); break;
      case Act::Sigmoid: acc = 1.0 / (1.0 + std::exp(-acc)); break;
      case Act::Gelu: acc = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0))); break;
    }
    y[o] = float(acc);
  }
  return y;
}

}  // namespace rlx
