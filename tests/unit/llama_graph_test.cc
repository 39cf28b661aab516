// The LLaMA graph on random weights of odd sizes (GQA 6:2 heads, head_dim 48,
// FFN 776, tied embeddings) against a plain double-precision forward pass
// written here, in Hugging Face's layout; and GGUF's layout (Q/K rows
// permuted into rotation pairs, interleaved RoPE) giving the same logits.
#include <gtest/gtest.h>

#include <cmath>

#include "models/llama.h"
#include "models/llama_reference.h"  // tests/models
#include "rlx/session.h"
#include "test_util.h"

namespace rlx {
namespace {

using test::odd_config;
using test::random_weights;
using test::reference;
using test::to_gguf_rows;
using test::Weights;


std::vector<float> run_graph(const LlamaConfig& c, const Weights& w, const std::vector<int32_t>& ids,
                             int64_t batch, int64_t seq, const std::vector<int32_t>& last) {
  Graph g = build_llama_graph(c, batch, seq, DType::F32);
  auto exe = compile(g, {});
  EXPECT_EQ(exe->report().backend, "cpu");
  for (const auto& [name, v] : w) exe->set_param_f32(name, v.data(), v.size());
  std::vector<int32_t> pos(static_cast<size_t>(seq));
  for (int64_t i = 0; i < seq; ++i) pos[size_t(i)] = int32_t(i);
  auto out = exe->run({{"input_ids", HostTensor::from_i32({batch, seq}, ids)},
                       {"positions", HostTensor::from_i32({seq}, pos)},
                       {"last_index", HostTensor::from_i32({batch}, last)}});
  EXPECT_EQ(out.at("logits").shape, (Shape{batch, c.vocab_size}));
  return out.at("logits").to_f32();
}

TEST(LlamaGraph, OddGqaShapeMatchesADoublePrecisionReference) {
  LlamaConfig c = odd_config();
  Weights w = random_weights(build_llama_graph(c, 1, 1, DType::F32));
  const int64_t B = 2, S = 13;
  std::vector<int32_t> ids = test::random_ints(size_t(B * S), 9, 0, c.vocab_size - 1);
  const std::vector<int> last = {12, 6};  // a full row and one read mid-sequence
  std::vector<float> got = run_graph(c, w, ids, B, S, {int32_t(last[0]), int32_t(S + last[1])});
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t> row(ids.begin() + b * S, ids.begin() + (b + 1) * S);
    std::vector<double> want = reference(c, w, row, last[size_t(b)]);
    std::vector<float> g(got.begin() + b * c.vocab_size, got.begin() + (b + 1) * c.vocab_size);
    test::expect_close(g, want, 1e-4, "logits of sequence " + std::to_string(b));
  }

  // GGUF layout: Q/K rows permuted into pairs, rope interleaved: same logits.
  LlamaConfig cg = c;
  cg.rope_interleaved = true;
  Weights wg = w;
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    wg[p + "attn_q.weight"] = to_gguf_rows(w[p + "attn_q.weight"], c.num_heads, c.head_dim, c.hidden_size);
    wg[p + "attn_k.weight"] = to_gguf_rows(w[p + "attn_k.weight"], c.num_kv_heads, c.head_dim, c.hidden_size);
  }
  std::vector<float> got_gguf = run_graph(cg, wg, ids, B, S, {int32_t(last[0]), int32_t(S + last[1])});
  test::expect_close(got_gguf, std::vector<double>(got.begin(), got.end()), 1e-5, "GGUF layout vs HF layout");
}

}  // namespace
}  // namespace rlx
