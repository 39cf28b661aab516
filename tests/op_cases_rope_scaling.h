// Op cases of RoPE's attention factor (YaRN's mscale, LongRoPE's factor:
// cos and sin times it) on every path that rotates: the rope kernel, the
// rotation fused into kv_write and the one fused into a decode step's
// attention. Part of the op case table: included by op_cases.h, after
// OpCase and ref_cache_head.
#pragma once

namespace rlx::test {

inline void add_rope_scaling_cases(std::vector<OpCase>& cases) {
  // Half-split pairs of 2 heads of 10 dims (8 rotated), divisors as YaRN's
  // ramp gives them, cos/sin times 1.23, positions {7, 40} + s.
  cases.push_back({"rope_attention_factor", "rope",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {2, 3, 20}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     RopeAttrs a;
                     a.heads = 2;
                     a.head_dim = 10;
                     a.n_rot = 8;
                     a.theta = 500.f;
                     a.pos_is_start = true;
                     a.freq_divisors = {1.f, 1.5f, 3.f, 4.f};
                     a.attention_factor = 1.23f;
                     c.graph.output("out", c.graph.rope(x, pos, a));
                     c.inputs["x"] = quantize(random_floats(2 * 3 * 20, 91, -2.f, 2.f), dt);
                     c.inputs["pos"] = {7.f, 40.f};
                     return c;
                   },
                   [](const Values& in) {
                     const auto &x = in.at("x"), &pos = in.at("pos");
                     const double div[4] = {1.0, 1.5, 3.0, 4.0}, af = double(1.23f);
                     std::vector<double> out(x.begin(), x.end());
                     for (int b = 0; b < 2; ++b)
                       for (int s = 0; s < 3; ++s)
                         for (int h = 0; h < 2; ++h)
                           for (int i = 0; i < 4; ++i) {
                             const double angle = (pos[size_t(b)] + s) * std::pow(500.0, -2.0 * i / 8.0) / div[i];
                             const size_t base = size_t((b * 3 + s) * 20 + h * 10);
                             const double a0 = x[base + size_t(i)], a1 = x[base + size_t(i + 4)];
                             out[base + size_t(i)] = af * (a0 * std::cos(angle) - a1 * std::sin(angle));
                             out[base + size_t(i + 4)] = af * (a1 * std::cos(angle) + a0 * std::sin(angle));
                           }
                     return Refs{{"out", out}};
                   }});

  // The fused K/V write with the factor: kv_write(cache, concat(rope(K),
  // V)) of one QKV row [2, 3, 37] (K = 2 heads of 6 at 8, 4 rotated,
  // interleaved; V 12 columns at 20), cos/sin times 0.85, positions {0, 6}.
  cases.push_back({"kv_write_rope_attention_factor", "kv_write",
                   [](DType dt) {
                     OpGraph c;
                     ValueId cache = c.graph.state("cache", {2, 9, 24}, dt);
                     ValueId qkv = c.graph.input("qkv", {2, 3, 37}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     RopeAttrs a;
                     a.heads = 2;
                     a.head_dim = 6;
                     a.n_rot = 4;
                     a.theta = 300.f;
                     a.interleaved = true;
                     a.pos_is_start = true;
                     a.freq_divisors = {1.f, 2.f};
                     a.attention_factor = 0.85f;
                     ValueId k = c.graph.rope(c.graph.narrow(qkv, 2, 8, 12), pos, a);
                     ValueId rows = c.graph.concat({k, c.graph.narrow(qkv, 2, 20, 12)}, 2);
                     c.graph.output("cache", c.graph.kv_write(cache, rows, pos));
                     c.inputs["qkv"] = quantize(random_floats(2 * 3 * 37, 92, -2.f, 2.f), dt);
                     c.inputs["pos"] = {0.f, 6.f};
                     return c;
                   },
                   [](const Values& in) {
                     const auto &qkv = in.at("qkv"), &pos = in.at("pos");
                     const double af = double(0.85f), div[2] = {1.0, 2.0};
                     std::vector<double> cache(2 * 9 * 24, 0.0);
                     for (int b = 0; b < 2; ++b)
                       for (int i = 0; i < 3; ++i) {
                         const int t = int(pos[size_t(b)]) + i;
                         const float* row = qkv.data() + (b * 3 + i) * 37;
                         double* dst = cache.data() + (b * 9 + t) * 24;
                         for (int e = 0; e < 24; ++e) dst[e] = row[8 + e];
                         for (int h = 0; h < 2; ++h)
                           for (int j = 0; j < 2; ++j) {
                             const double angle = t * std::pow(300.0, -2.0 * j / 4.0) / div[j];
                             const double a0 = row[8 + h * 6 + 2 * j], a1 = row[8 + h * 6 + 2 * j + 1];
                             dst[h * 6 + 2 * j] = af * (a0 * std::cos(angle) - a1 * std::sin(angle));
                             dst[h * 6 + 2 * j + 1] = af * (a1 * std::cos(angle) + a0 * std::sin(angle));
                           }
                       }
                     return Refs{{"cache", cache}};
                   }});

  // A decode step's attention rotating q with the factor: q a 24-column
  // slice at 5 of [2, 1, 40], 4 heads of 6 (4 rotated, half-split) at
  // positions {3, 8}, GQA 4:2 over 10 keys, causal, cos/sin times 1.4.
  cases.push_back({"attention_decode_rotated_q_attention_factor", "attention",
                   [](DType dt) {
                     OpGraph c;
                     ValueId x = c.graph.input("x", {2, 1, 40}, dt);
                     ValueId k = c.graph.input("k", {2, 10, 12}, dt);
                     ValueId v = c.graph.input("v", {2, 10, 12}, dt);
                     ValueId pos = c.graph.input("pos", {2}, DType::I32);
                     RopeAttrs r;
                     r.heads = 4;
                     r.head_dim = 6;
                     r.n_rot = 4;
                     r.theta = 70.f;
                     r.pos_is_start = true;
                     r.freq_divisors = {1.f, 3.f};
                     r.attention_factor = 1.4f;
                     AttentionAttrs a;
                     a.q_heads = 4;
                     a.kv_heads = 2;
                     a.head_dim = 6;
                     a.scale = 0.37f;
                     a.mask = MaskKind::Causal;
                     a.q_pos = true;
                     ValueId q = c.graph.rope(c.graph.narrow(x, 2, 5, 24), pos, r);
                     c.graph.output("out", c.graph.attention(q, k, v, -1, a, pos));
                     c.inputs["x"] = quantize(random_floats(2 * 40, 93, -2.f, 2.f), dt);
                     c.inputs["k"] = quantize(random_floats(2 * 10 * 12, 94, -2.f, 2.f), dt);
                     c.inputs["v"] = quantize(random_floats(2 * 10 * 12, 95, -2.f, 2.f), dt);
                     c.inputs["pos"] = {3.f, 8.f};
                     return c;
                   },
                   [](const Values& in) {
                     const auto &x = in.at("x"), &k = in.at("k"), &v = in.at("v"), &pos = in.at("pos");
                     const double af = double(1.4f), div[2] = {1.0, 3.0};
                     std::vector<double> out(2 * 24, 0.0);
                     for (int b = 0; b < 2; ++b) {
                       const int last = int(pos[size_t(b)]);
                       for (int h = 0; h < 4; ++h) {
                         double q[6];
                         const float* xh = x.data() + b * 40 + 5 + h * 6;
                         for (int e = 0; e < 6; ++e) q[e] = xh[e];
                         for (int i = 0; i < 2; ++i) {
                           const double angle = last * std::pow(70.0, -2.0 * i / 4.0) / div[i];
                           q[i] = af * (xh[i] * std::cos(angle) - xh[i + 2] * std::sin(angle));
                           q[i + 2] = af * (xh[i + 2] * std::cos(angle) + xh[i] * std::sin(angle));
                         }
                         ref_cache_head(q, k, v, b, h / 2, last, double(0.37f), out.data() + b * 24 + h * 6);
                       }
                     }
                     return Refs{{"out", out}};
                   }});
}

}  // namespace rlx::test
