#include "models/logit_check.h"

#include <cmath>
#include <vector>

#include "rlx/error.h"

namespace rlx {

void check_logits_finite(const std::map<std::string, HostTensor>& out, int64_t rows, const std::string& what) {
  auto fail = [&](int64_t row) {
    RLX_FAIL("llama: " << what << " gave NaN logits" << (rows > 1 ? " in row " + std::to_string(row) : std::string())
                       << " (NaN or inf in the weights or activations): no token is chosen from them");
  };
  if (auto it = out.find("logits"); it != out.end()) {
    const std::vector<float> l = it->second.to_f32();
    const int64_t n = it->second.shape.empty() ? 0 : it->second.shape.back();
    for (int64_t r = 0; r < rows && n > 0 && (r + 1) * n <= int64_t(l.size()); ++r)
      for (int64_t i = 0; i < n; ++i)
        if (std::isnan(l[size_t(r * n + i)])) fail(r);
    return;
  }
  if (auto it = out.find("logit_sum"); it != out.end()) {
    const std::vector<float> s = it->second.to_f32();
    for (int64_t r = 0; r < rows && r < int64_t(s.size()); ++r)
      if (std::isnan(s[size_t(r)])) fail(r);
  }
}

}  // namespace rlx
