// fuse_head_norm_rope: Qwen3's per-head q/k RMSNorm,
// reshape(rms_norm(reshape(slice, [.., heads, head_dim]), gamma)), folds
// into the rope after it, so K's rope is again a rope of the QKV product's
// slice and fuse_kv_write makes one cache write of K (normalized, rotated)
// and V. The fused graphs' outputs equal the unfused ones.
#include <gtest/gtest.h>

#include "fusion_check.h"

namespace rlx {
namespace {

// q: 3 heads of 6 at 0; k: 1 head of 6 at 18; v: 6 at 24; 4 unused columns.
// n_rot 4 of head_dim 6: the two tail dims of each head are normalized too.
Graph qk_norm_layer(int64_t seq, bool norm_feeds_output = false) {
  Graph g;
  const ValueId qkv = g.input("qkv", {2, seq, 34}, DType::F32);
  const ValueId pos = g.input("pos", {2}, DType::I32);
  auto head_norm = [&](ValueId x, const char* gain, int64_t heads) {
    const ValueId normed = g.rms_norm(g.reshape(x, {2, seq, heads, 6}), g.param(gain, {6}, DType::F32), 1e-5f);
    if (norm_feeds_output && heads == 1) g.output("k_normed", normed);
    return g.reshape(normed, {2, seq, heads * 6});
  };
  RopeAttrs rq;
  rq.heads = 3;
  rq.head_dim = 6;
  rq.n_rot = 4;
  rq.theta = 70.f;
  rq.pos_is_start = true;
  RopeAttrs rk = rq;
  rk.heads = 1;
  const ValueId q = g.rope(head_norm(g.narrow(qkv, 2, 0, 18), "q_norm", 3), pos, rq);
  const ValueId k = g.rope(head_norm(g.narrow(qkv, 2, 18, 6), "k_norm", 1), pos, rk);
  const ValueId kv = g.kv_write(g.state("kv", {2, 9, 12}, DType::F32), g.concat({k, g.narrow(qkv, 2, 24, 6)}, 2), pos);
  AttentionAttrs at;
  at.q_heads = 3;
  at.kv_heads = 1;
  at.head_dim = 6;
  at.scale = 0.4f;
  at.mask = MaskKind::Causal;
  at.q_pos = true;
  g.output("y", g.attention(q, g.narrow(kv, 2, 0, 6), g.narrow(kv, 2, 6, 6), -1, at, pos));
  g.output("cache", kv);
  return g;
}

TEST(HeadNormRopeFusion, PrefillNormsFoldIntoTheRopeAndTheCacheWrite) {
  auto r = test::expect_fusion_preserves_outputs(qk_norm_layer(4), 601, {{"pos", HostTensor::from_i32({2}, {0, 3})}});
  EXPECT_EQ(test::thunks_of(*r.unfused, "norm"), 2);
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 0) << r.fused->report().schedule;
  EXPECT_EQ(test::thunks_of(*r.fused, "rope"), 1) << "q's: 4 query rows are no decode step";
  EXPECT_EQ(test::thunks_of(*r.fused, "kv_write"), 1);
  EXPECT_EQ(test::thunks_of(*r.fused, "copy"), 1) << "only the cache's copy to the output\n"
                                                  << r.fused->report().schedule;
  // Batch 1's rows 3..6 hold normalized K: each head's RMS before the gain
  // is 1, so the rows are not the raw projection (nor the zeros of a fresh cache).
  const std::vector<float> cache = r.fused_out.at("cache").to_f32();
  EXPECT_NE(cache[size_t((9 + 3) * 12)], 0.f);
}

TEST(HeadNormRopeFusion, DecodeStepKeepsQsNormedRope) {
  // Attention does not normalize q: q's rope (with its norm) stays a rope
  // kernel instead of folding into the attention.
  auto r = test::expect_fusion_preserves_outputs(qk_norm_layer(1), 602, {{"pos", HostTensor::from_i32({2}, {5, 8})}});
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 0);
  EXPECT_EQ(test::thunks_of(*r.fused, "rope"), 1) << r.fused->report().schedule;
  EXPECT_EQ(test::thunks_of(*r.fused, "kv_write"), 1);
  EXPECT_EQ(test::thunks_of(*r.fused, "attention"), 1);
}

TEST(HeadNormRopeFusion, ANormReadElsewhereStays) {
  auto r = test::expect_fusion_preserves_outputs(qk_norm_layer(3, true), 603,
                                                 {{"pos", HostTensor::from_i32({2}, {2, 0})}});
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 1) << "k's norm is an output too\n" << r.fused->report().schedule;
}

}  // namespace
}  // namespace rlx
