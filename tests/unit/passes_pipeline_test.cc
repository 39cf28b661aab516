#include <gtest/gtest.h>

#include "compile/passes.h"
#include "fusion_check.h"
#include "pass_test_graphs.h"
#include "rlx/session.h"

namespace rlx {
namespace {

using test::count_live;
using test::LayerDims;

Graph bert_graph(const LayerDims& d, int layers) {
  Graph g;
  ValueId x = g.input("x", {d.batch, d.seq, d.hidden()}, DType::F32);
  ValueId mask = g.input("mask", {d.batch, d.seq}, DType::I32);
  for (int l = 0; l < layers; ++l) test::build_bert_layer(g, d, "l" + std::to_string(l) + ".", x, mask, x);
  g.output("y", x);
  return g;
}

Graph llama_graph(const LayerDims& d, int64_t kv_heads, int layers) {
  Graph g;
  ValueId x = g.input("x", {d.batch, d.seq, d.hidden()}, DType::F32);
  ValueId pos = g.input("pos", {d.seq}, DType::I32);
  for (int l = 0; l < layers; ++l)
    x = test::build_llama_layer(g, d, kv_heads, "l" + std::to_string(l) + ".", x, pos);
  g.output("y", x);
  return g;
}

std::vector<int32_t> padding_mask(const LayerDims& d) {
  std::vector<int32_t> m(size_t(d.batch * d.seq), 1);
  for (int64_t s = d.seq - 2; s < d.seq; ++s) m[size_t(d.seq + s)] = 0;  // pad the end of row 1
  return m;
}

TEST(PassPipeline, BertLayerFusesToOneQkvMatmulAndNoSliceCopies) {
  const LayerDims d;
  Graph g = bert_graph(d, 1);
  CompileOptions opts;
  run_passes(g, opts);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::MatMul), 4);  // qkv, out, ffn1, ffn2
  EXPECT_EQ(count_live(g, OpKind::Narrow), 0);
  EXPECT_EQ(count_live(g, OpKind::Add), 0);
  EXPECT_EQ(count_live(g, OpKind::Gelu), 0);
  EXPECT_EQ(count_live(g, OpKind::LayerNorm), 0);
  EXPECT_EQ(count_live(g, OpKind::AddNorm), 2);
  EXPECT_EQ(count_live(g, OpKind::Attention), 1);
  int qkv = 0;
  for (const Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::MatMul) continue;
    const Node& w = g.node(g.value(n.inputs[1]).producer);
    if (w.op != OpKind::Concat) continue;
    ++qkv;
    EXPECT_EQ(w.inputs.size(), 3u);
    ASSERT_EQ(n.inputs.size(), 3u);  // the concatenated bias
    EXPECT_EQ(g.node(g.value(n.inputs[2]).producer).op, OpKind::Concat);
  }
  EXPECT_EQ(qkv, 1);
  for (const Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::Attention) continue;
    const auto& at = std::get<AttentionAttrs>(n.attrs);
    EXPECT_EQ(n.inputs[0], n.inputs[1]);
    EXPECT_EQ(n.inputs[0], n.inputs[2]);
    EXPECT_EQ(at.k_offset, d.hidden());
    EXPECT_EQ(at.v_offset, 2 * d.hidden());
    EXPECT_EQ(at.q_stride, 3 * d.hidden());
  }
  CompileOptions unfused;
  unfused.fuse = false;
  Graph plain = bert_graph(d, 1);
  const size_t before = plain.live_node_count();
  run_passes(plain, unfused);
  EXPECT_EQ(plain.live_node_count(), before);
  EXPECT_EQ(count_live(plain, OpKind::MatMul), 6);
}

TEST(PassPipeline, NumericBertLayersMatchUnfused) {
  LayerDims d;
  d.batch = 2;
  d.seq = 9;
  d.heads = 2;
  d.head_dim = 7;
  d.ffn = 33;
  Graph g = bert_graph(d, 2);
  auto r = test::expect_fusion_preserves_outputs(
      g, 501, {{"mask", HostTensor::from_i32({d.batch, d.seq}, padding_mask(d))}});
  EXPECT_EQ(test::thunks_of(*r.fused, "matmul"), 8);
  EXPECT_EQ(test::thunks_of(*r.fused, "copy"), 0);
  EXPECT_EQ(test::thunks_of(*r.fused, "binary"), 0);
  EXPECT_EQ(test::thunks_of(*r.fused, "unary"), 0);
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 4);
  EXPECT_LT(r.fused->report().thunk_count, r.unfused->report().thunk_count);
}

TEST(PassPipeline, LlamaLayerFusesPreNormResidualsAndRopeSlices) {
  const LayerDims d;
  Graph g = llama_graph(d, 1, 2);
  run_passes(g, CompileOptions{});
  verify(g);
  // Per layer: merged qkv, wo, merged gate/up, down.
  EXPECT_EQ(count_live(g, OpKind::MatMul), 8);
  EXPECT_EQ(count_live(g, OpKind::Rope), 4);
  // Layer 0's second norm and layer 1's two norms read residual sums.
  EXPECT_EQ(count_live(g, OpKind::AddNorm), 3);
  EXPECT_EQ(count_live(g, OpKind::RmsNorm), 1);
  EXPECT_EQ(count_live(g, OpKind::Add), 1);  // the last residual add feeds the output only
  for (const Node& n : g.nodes()) {
    if (n.dead) continue;
    if (n.op == OpKind::Rope || n.op == OpKind::Attention || n.op == OpKind::SwiGlu)
      for (ValueId in : n.inputs) EXPECT_NE(g.node(g.value(in).producer).op, OpKind::Narrow);
  }
  // SwiGLU reads the gate and up halves of the merged product in place.
  EXPECT_EQ(count_live(g, OpKind::SwiGlu), 2);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 0);
}

TEST(PassPipeline, NumericLlamaLayersMatchUnfused) {
  // 9 rows: the norms stay (as add_norms after the first); 3 rows are few
  // enough for the matrix-vector products, which take them (fuse_matvec).
  for (int64_t seq : {9, 3}) {
    SCOPED_TRACE("seq " + std::to_string(seq));
    LayerDims d;
    d.batch = 1;
    d.seq = seq;
    d.heads = 4;
    d.head_dim = 6;
    d.ffn = 13;
    Graph g = llama_graph(d, 2, 2);
    std::vector<int32_t> pos(size_t(d.seq));
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = int32_t(3 + i);
    auto r = test::expect_fusion_preserves_outputs(g, 502, {{"pos", HostTensor::from_i32({d.seq}, pos)}});
    EXPECT_EQ(test::thunks_of(*r.fused, "matmul"), 8);
    EXPECT_EQ(test::thunks_of(*r.fused, "swiglu"), 2);
    EXPECT_EQ(test::thunks_of(*r.fused, "norm"), seq > kMatMulFusedRows ? 4 : 0);
    EXPECT_LT(r.fused->report().thunk_count, r.unfused->report().thunk_count);
  }
}

}  // namespace
}  // namespace rlx
