// The fusions of a decoder layer over its KV cache. fuse_kv_write: the K/V
// write, kv_write(cache, concat(rope(K slice), V slice)) of one QKV
// projection, becomes one kv_write that reads the projection in place and
// rotates K itself. fuse_rope_attention: in a decode step (one query row)
// attention rotates q itself. The fused graphs' outputs (attention over the
// cache and the cache itself) equal the unfused ones.
#include <gtest/gtest.h>

#include "fusion_check.h"

namespace rlx {
namespace {

struct Layer {
  Graph g;
  ValueId qkv, pos;
};

// q: 4 heads of 4 at 0; k: 2 heads of 4 at 16 (n_rot 4); v: 8 at 24; 5
// unused columns. The cache holds 11 rows of K then V.
Layer decoder_layer(bool k_rope_at_write_pos, int64_t seq = 5) {
  Layer l;
  Graph& g = l.g;
  l.qkv = g.input("qkv", {2, seq, 37}, DType::F32);
  l.pos = g.input("pos", {2}, DType::I32);
  RopeAttrs rq;
  rq.heads = 4;
  rq.head_dim = 4;
  rq.theta = 50.f;
  rq.pos_is_start = true;
  RopeAttrs rk = rq;
  rk.heads = 2;
  const ValueId k_pos = k_rope_at_write_pos ? l.pos : g.input("other_pos", {2}, DType::I32);
  ValueId q = g.rope(g.narrow(l.qkv, 2, 0, 16), l.pos, rq);
  ValueId k = g.rope(g.narrow(l.qkv, 2, 16, 8), k_pos, rk);
  ValueId kv = g.kv_write(g.state("kv", {2, 11, 16}, DType::F32), g.concat({k, g.narrow(l.qkv, 2, 24, 8)}, 2), l.pos);
  AttentionAttrs at;
  at.q_heads = 4;
  at.kv_heads = 2;
  at.head_dim = 4;
  at.scale = 0.5f;
  at.mask = MaskKind::Causal;
  at.q_pos = true;
  g.output("y", g.attention(q, g.narrow(kv, 2, 0, 8), g.narrow(kv, 2, 8, 8), -1, at, l.pos));
  g.output("cache", kv);
  return l;
}

TEST(KvWriteFusion, RopeAndSlicesFoldIntoOneWrite) {
  Layer l = decoder_layer(true);
  auto r = test::expect_fusion_preserves_outputs(l.g, 501, {{"pos", HostTensor::from_i32({2}, {0, 3})}});
  EXPECT_EQ(test::thunks_of(*r.unfused, "rope"), 2);
  EXPECT_EQ(test::thunks_of(*r.fused, "rope"), 1) << "q's rope is left: 5 query rows are no decode step";
  EXPECT_EQ(test::thunks_of(*r.fused, "kv_write"), 1);
  EXPECT_GT(test::thunks_of(*r.unfused, "copy"), 1);
  EXPECT_EQ(test::thunks_of(*r.fused, "copy"), 1) << "only the cache's copy to the output\n"
                                                  << r.fused->report().schedule;
  // Rows 3..7 of batch 1 are written and rotated: not the zeros of a fresh cache.
  const std::vector<float> cache = r.fused_out.at("cache").to_f32();
  EXPECT_NE(cache[size_t((11 + 3) * 16)], 0.f);
}

TEST(KvWriteFusion, RopeAtOtherPositionsIsNotFolded) {
  Layer l = decoder_layer(false);
  auto r = test::expect_fusion_preserves_outputs(
      l.g, 502, {{"pos", HostTensor::from_i32({2}, {1, 4})}, {"other_pos", HostTensor::from_i32({2}, {5, 0})}});
  EXPECT_EQ(test::thunks_of(*r.fused, "rope"), 2);
  EXPECT_EQ(test::thunks_of(*r.fused, "kv_write"), 1);
}

TEST(RopeAttentionFusion, DecodeStepRotatesQInAttention) {
  Layer l = decoder_layer(true, 1);
  auto r = test::expect_fusion_preserves_outputs(l.g, 503, {{"pos", HostTensor::from_i32({2}, {6, 9})}});
  EXPECT_EQ(test::thunks_of(*r.unfused, "rope"), 2);
  EXPECT_EQ(test::thunks_of(*r.fused, "rope"), 0) << r.fused->report().schedule;
  EXPECT_EQ(test::thunks_of(*r.fused, "kv_write"), 1);
  EXPECT_EQ(test::thunks_of(*r.fused, "attention"), 1);
}

TEST(RopeAttentionFusion, RotatingQNeedsOneQueryRowAtRunTimePositions) {
  Graph g;
  ValueId q = g.input("q", {1, 2, 8}, DType::F32), kv = g.input("kv", {1, 4, 8}, DType::F32);
  AttentionAttrs at;
  at.q_heads = at.kv_heads = 2;
  at.head_dim = 4;
  at.q_pos = true;
  at.rotate_q = true;
  at.q_rope.heads = 2;
  at.q_rope.head_dim = 4;
  const std::string e = test::error_of([&] { g.attention(q, kv, kv, -1, at, g.input("pos", {1}, DType::I32)); });
  EXPECT_NE(e.find("one query row"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlx
