// Decode with the KV cache against a full-prefix forward, step by step, on
// one device: a prefill graph and a seq-1 decode graph sharing one arena
// (weights and cache) against the cache-less graph of the whole sequence.
// Shared by the CPU suite and the GPU suite.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "backends/backend.h"
#include "models/llama.h"
#include "models/llama_reference.h"
#include "rlx/session.h"
#include "test_util.h"

namespace rlx::test {

// GQA 6:2, head_dim 12, hidden 72, FFN 101, vocab 61: sizes no kernel tiles evenly.
inline LlamaConfig small_odd_config() {
  LlamaConfig c;
  c.vocab_size = 61;
  c.hidden_size = 72;
  c.intermediate_size = 101;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_dim = 12;
  c.rope_dims = 12;
  c.rope_theta = 10000.f;
  c.rms_eps = 1e-5f;
  c.max_positions = 64;
  c.tie_embeddings = true;  // as the double reference assumes
  return c;
}

// Logits of one run, the outputs poisoned with NaN in the arena first.
inline std::vector<float> poisoned_run(Executable& exe, const std::map<std::string, HostTensor>& in) {
  for (const Binding& b : exe.schedule().output_bindings)
    exe.backend().write_binding(b, nan_bytes(size_t(numel(b.shape)), b.dtype).data());
  return exe.run(in).at("logits").to_f32();
}

inline double max_rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff = std::max(diff, std::abs(double(got[i]) - double(ref[i])));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  return scale > 0 ? diff / scale : INFINITY;  // all-zero logits fail too
}

// Prefills `prompt` tokens, then decodes `steps` more one at a time; every
// step's logits must equal the full forward's at that position within
// `tol` (max |difference| / max |logit|). `on_decode` then inspects the
// decode executable (how the backend ran it). Returns the worst error.
inline double check_decode_against_full(const LlamaConfig& c, CompileOptions o, DType dt, int prompt, int steps,
                                        double tol, const std::function<void(Executable&)>& on_decode = {}) {
  const int64_t total = prompt + steps, cache = total + 6;  // the cache is longer than the sequence
  const Graph full_g = build_llama_graph(c, 1, total, dt);
  const Weights w = random_weights(full_g);
  auto full = compile(full_g, o);
  for (const auto& [name, v] : w) full->set_param_f32(name, v.data(), v.size());

  const Graph pre_g = build_llama_graph(c, 1, prompt, dt, cache), dec_g = build_llama_graph(c, 1, 1, dt, cache);
  CompileOptions so = o;
  so.arena_share = make_arena_share(std::max(planned_arena_bytes(pre_g, o), planned_arena_bytes(dec_g, o)));
  auto pre = compile(pre_g, so);
  for (const auto& [name, v] : w) pre->set_param_f32(name, v.data(), v.size());
  auto dec = compile(dec_g, so);
  dec->share_params_with(*pre);
  EXPECT_EQ(dec->report().thunk_histogram.count("kv_write"), 1u);
  // One K/V cache per layer, and the decode loop's next_token and next_pos.
  EXPECT_EQ(dec->schedule().state_bindings.size(), size_t(c.num_layers + 2));

  const std::vector<int32_t> ids = random_ints(size_t(total), 17, 0, c.vocab_size - 1);
  std::vector<int32_t> positions(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) positions[size_t(i)] = int32_t(i);
  auto full_logits = [&](int64_t last) {
    return poisoned_run(*full, {{"input_ids", HostTensor::from_i32({1, total}, ids)},
                                {"positions", HostTensor::from_i32({total}, positions)},
                                {"last_index", HostTensor::from_i32({1}, {int32_t(last)})}});
  };

  double worst = 0;
  std::vector<float> got = poisoned_run(
      *pre, {{"input_ids", HostTensor::from_i32({1, prompt}, std::vector<int32_t>(ids.begin(), ids.begin() + prompt))},
             {"pos", HostTensor::from_i32({1}, {0})},
             {"last_index", HostTensor::from_i32({1}, {int32_t(prompt - 1)})}});
  double e = max_rel_error(got, full_logits(prompt - 1));
  EXPECT_LE(e, tol) << "prefill of " << prompt << " tokens";
  worst = std::max(worst, e);
  for (int64_t t = prompt; t < total; ++t) {
    got = poisoned_run(*dec, {{"input_ids", HostTensor::from_i32({1, 1}, {ids[size_t(t)]})},
                              {"pos", HostTensor::from_i32({1}, {int32_t(t)})},
                              {"last_index", HostTensor::from_i32({1}, {0})}});
    e = max_rel_error(got, full_logits(t));
    EXPECT_LE(e, tol) << "decode step at position " << t;
    worst = std::max(worst, e);
  }
  EXPECT_EQ(dec->run_count(), uint64_t(steps));
  if (on_decode) on_decode(*dec);
  // The last step against the independent double-precision forward, too.
  if (!c.rope_interleaved && c.tie_embeddings) expect_close(got, reference(c, w, ids, int(total - 1)), tol * 10, "last decode step");
  return worst;
}

}  // namespace rlx::test
