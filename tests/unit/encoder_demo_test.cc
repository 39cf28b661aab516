// The demo encoder is the BERT builder's graph: the same nodes as the BERT
// graph for the same config less the token types and the pooling, the same
// values as a BERT model whose token type embedding is zero, and the fused
// schedule the GPU parity test counts on.
#include "models/encoder_demo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "models/bert.h"
#include "rlx/session.h"
#include "test_util.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

EncoderShape small_shape() {
  EncoderShape s;
  s.layers = 2, s.hidden = 48, s.heads = 4, s.ffn = 80, s.vocab = 101, s.max_positions = 40;
  s.batch = 3, s.seq = 13;
  return s;
}

// One line per node: op, name and the shape and dtype of each output.
std::vector<std::string> node_lines(const Graph& g) {
  std::vector<std::string> out;
  for (const Node& n : g.nodes()) {
    std::ostringstream os;
    os << op_name(n.op) << " '" << n.name << "'";
    for (ValueId v : n.outputs) os << " " << shape_str(g.value(v).shape) << dtype_name(g.value(v).dtype);
    out.push_back(os.str());
  }
  return out;
}

TEST(EncoderDemo, HasTheBertGraphsNodes) {
  const EncoderShape s = small_shape();
  const BertConfig c = encoder_demo_config(s);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.hidden_size, 48);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.intermediate_size, 80);
  EXPECT_EQ(c.vocab_size, 101);
  EXPECT_EQ(c.max_position_embeddings, 40);
  BertGraphParts none;
  none.token_types = false;
  none.pooled = false;
  const auto demo = node_lines(build_encoder_demo(s));
  EXPECT_EQ(demo, node_lines(build_bert_graph(c, Pooling::Cls, s.batch, s.seq, s.dtype, none)));
  // The full BERT graph holds the demo's nodes in the same order; what it
  // adds is the token type input and embedding, and the pooled output.
  const Graph full_g = build_bert_graph(c, Pooling::Mean, s.batch, s.seq, s.dtype);
  const auto full = node_lines(full_g);
  std::vector<std::string> extra;
  size_t i = 0;
  for (const std::string& line : full) {
    if (i < demo.size() && line == demo[i]) ++i;
    else extra.push_back(line);
  }
  EXPECT_EQ(i, demo.size()) << "the demo's nodes are not a subsequence of the BERT graph's";
  ASSERT_GE(extra.size(), 4u);
  EXPECT_EQ(extra[0], "input 'token_type_ids' [3, 13]i32");
  EXPECT_EQ(extra[1], "param 'embeddings.token_type_embeddings.weight' [2, 48]f32");
  EXPECT_EQ(full_g.outputs().back().first, "embedding");
  Graph demo_g = build_encoder_demo(s);
  ASSERT_EQ(demo_g.outputs().size(), 1u);
  EXPECT_EQ(demo_g.outputs()[0].first, "last_hidden_state");
}

// Same params by name, token type embedding all zero: the demo and the BERT
// graph must give the same hidden states.
TEST(EncoderDemo, EqualsBertWithZeroTokenTypes) {
  const EncoderShape s = small_shape();
  CompileOptions co;
  co.device = Device::Cpu;
  auto demo = compile(build_encoder_demo(s), co);
  auto bert = compile(build_bert_graph(encoder_demo_config(s), Pooling::Mean, s.batch, s.seq, s.dtype), co);
  test::Rng rng(3);
  for (const std::string& name : bert->param_names()) {
    size_t n = 0;
    for (const Binding& b : bert->schedule().param_bindings)
      if (b.name == name) n = size_t(numel(b.shape));
    ASSERT_GT(n, 0u) << name;
    const bool scale = name.find("LayerNorm.weight") != std::string::npos;
    auto v = test::random_floats(n, rng.next(), scale ? 0.8f : -0.2f, scale ? 1.2f : 0.2f);
    if (name == "embeddings.token_type_embeddings.weight") std::fill(v.begin(), v.end(), 0.f);
    bert->set_param_f32(name, v.data(), v.size());
    if (name != "embeddings.token_type_embeddings.weight") demo->set_param_f32(name, v.data(), v.size());
  }
  EXPECT_EQ(demo->param_names().size() + 1, bert->param_names().size());
  auto ids = test::random_ints(size_t(s.batch * s.seq), 9, 0, s.vocab - 1);
  std::vector<int32_t> mask(ids.size(), 1), types(ids.size(), 0);
  for (int t = s.seq - 4; t < s.seq; ++t) mask[size_t(s.seq + t)] = 0;  // row 1 padded
  const Shape bs{s.batch, s.seq};
  std::map<std::string, HostTensor> in{{"input_ids", HostTensor::from_i32(bs, ids)},
                                       {"attention_mask", HostTensor::from_i32(bs, mask)}};
  auto got = demo->run(in).at("last_hidden_state").to_f32();
  in["token_type_ids"] = HostTensor::from_i32(bs, types);
  auto want = bert->run(in).at("last_hidden_state").to_f32();
  ASSERT_EQ(got.size(), size_t(s.batch * s.seq * s.hidden));
  EXPECT_FALSE(std::all_of(got.begin(), got.end(), [](float x) { return x == 0; }));
  test::expect_close(got, test::to_double(want), 1e-5, "demo vs bert");
}

// The fused schedule tests/gpu/graph_parity_test.cc (EncoderParity) expects:
// per layer merged QKV, attention output, FFN in and out products, attention
// on the merged QKV through strides, two add+norms; one binary (the
// embedding sum) outside.
TEST(EncoderDemo, FusedScheduleHasSevenThunksPerLayer) {
  EncoderShape s = small_shape();
  for (DType dt : {DType::F32, DType::F16}) {
    s.dtype = dt;
    auto exe = compile(build_encoder_demo(s));
    const auto& h = exe->report().thunk_histogram;
    auto count = [&](const char* k) { return h.count(k) ? h.at(k) : 0; };
    const std::string sched = exe->report().schedule;
    EXPECT_EQ(count("binary"), 1) << sched;
    EXPECT_EQ(count("matmul"), 4 * s.layers) << sched;
    EXPECT_EQ(count("attention"), s.layers) << sched;
    EXPECT_EQ(count("norm"), 1 + 2 * s.layers) << sched;
    EXPECT_EQ(exe->schedule().thunks.size(), size_t(4 + 7 * s.layers)) << sched;
  }
}

TEST(EncoderDemo, RefusesImpossibleShapes) {
  EncoderShape s = small_shape();
  s.heads = 5;
  EXPECT_NE(test::error_of([&] { build_encoder_demo(s); }).find("hidden 48 is not a multiple of heads 5"),
            std::string::npos);
  s = small_shape();
  s.seq = 41;
  EXPECT_NE(test::error_of([&] { build_encoder_demo(s); }).find("seq 41 exceeds max_positions 40"),
            std::string::npos);
}

}  // namespace
}  // namespace rlx
