#include "engine/token_choice.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "rlx/error.h"

namespace rlx {
namespace {

SamplingOptions sampler_options(const SamplingParams& p, uint64_t seed) {
  SamplingOptions o;
  o.temperature = p.temperature;
  o.top_k = p.top_k;
  o.top_p = p.top_p;
  o.seed = seed;
  return o;
}

}  // namespace

void check_sampling(const SamplingParams& p) {
  RLX_CHECK(std::isfinite(p.temperature) && p.temperature >= 0.f, "temperature " << p.temperature << " must be >= 0");
  RLX_CHECK(p.top_k >= 0, "top_k " << p.top_k << " must be >= 0");
  RLX_CHECK(std::isfinite(p.top_p) && p.top_p > 0.f && p.top_p <= 1.f, "top_p " << p.top_p << " must be in (0, 1]");
  RLX_CHECK(std::isfinite(p.min_p) && p.min_p >= 0.f && p.min_p <= 1.f, "min_p " << p.min_p << " must be in [0, 1]");
  RLX_CHECK(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.f,
            "repeat_penalty " << p.repeat_penalty << " must be > 0");
  RLX_CHECK(p.repeat_last_n >= -1, "repeat_last_n " << p.repeat_last_n << " must be >= -1");
  RLX_CHECK(std::isfinite(p.frequency_penalty) && std::fabs(p.frequency_penalty) <= 2.f,
            "frequency_penalty " << p.frequency_penalty << " must be in [-2, 2]");
  RLX_CHECK(std::isfinite(p.presence_penalty) && std::fabs(p.presence_penalty) <= 2.f,
            "presence_penalty " << p.presence_penalty << " must be in [-2, 2]");
}

TokenChoice::TokenChoice(const SamplingParams& p, uint64_t seed)
    : p_(p), sampler_(sampler_options(p, seed)),
      needs_logits_(p.temperature > 0.f || p.min_p > 0.f || p.repeat_penalty != 1.f || p.frequency_penalty != 0.f ||
                    p.presence_penalty != 0.f) {}

int32_t TokenChoice::choose(int32_t argmax_id, std::vector<float>& logits, const std::vector<int32_t>& history,
                            int64_t position) const {
  if (!needs_logits_) return argmax_id;
  const int64_t vocab = int64_t(logits.size());
  // Penalties over the last repeat_last_n tokens, as llama.cpp applies them.
  const bool penalize = p_.repeat_penalty != 1.f || p_.frequency_penalty != 0.f || p_.presence_penalty != 0.f;
  if (penalize && p_.repeat_last_n != 0) {
    const size_t n = p_.repeat_last_n < 0 ? history.size() : std::min(history.size(), size_t(p_.repeat_last_n));
    std::unordered_map<int32_t, int> count;
    for (size_t i = history.size() - n; i < history.size(); ++i) ++count[history[i]];
    for (auto [id, c] : count) {
      if (id < 0 || id >= vocab) continue;
      float& l = logits[size_t(id)];
      l = l > 0.f ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= float(c) * p_.frequency_penalty + p_.presence_penalty;
    }
  }
  // min-p: keep tokens at least min_p times as likely as the likeliest.
  if (p_.min_p > 0.f) {
    float top = -std::numeric_limits<float>::infinity();
    for (float l : logits)
      if (l > top) top = l;
    const float floor = top + std::log(p_.min_p);
    for (float& l : logits)
      if (!(l >= floor)) l = -std::numeric_limits<float>::infinity();
  }
  if (p_.temperature <= 0.f) return argmax(logits);
  return sampler_.next(logits, position);
}

}  // namespace rlx
