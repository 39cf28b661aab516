// The BERT graph's structure and weight validation (no backend needed).
#include <gtest/gtest.h>

#include "test_util.h"

#include <functional>

#include "models/bert.h"
#include "models/test_files.h"  // tests/models

namespace rlx {
namespace {

using test::error_of;

using test::TempDir;


BertConfig tiny_config() {
  BertConfig c;
  c.model_type = "bert";
  c.vocab_size = 11;
  c.hidden_size = 6;
  c.num_attention_heads = 2;
  c.num_hidden_layers = 2;
  c.intermediate_size = 7;
  c.max_position_embeddings = 9;
  c.type_vocab_size = 2;
  return c;
}

int count_ops(const Graph& g, OpKind k) {
  int n = 0;
  for (const Node& node : g.nodes()) n += !node.dead && node.op == k;
  return n;
}

TEST(BertGraph, ShapesAndStructure) {
  BertConfig c = tiny_config();
  Graph g = build_bert_graph(c, Pooling::Mean, 3, 5, DType::F32);
  verify(g);
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0].first, "last_hidden_state");
  EXPECT_EQ(g.value(g.outputs()[0].second).shape, (Shape{3, 5, 6}));
  EXPECT_EQ(g.outputs()[1].first, "embedding");
  EXPECT_EQ(g.value(g.outputs()[1].second).shape, (Shape{3, 6}));
  EXPECT_EQ(count_ops(g, OpKind::Attention), 2);
  EXPECT_EQ(count_ops(g, OpKind::LayerNorm), 1 + 2 * 2);
  EXPECT_EQ(count_ops(g, OpKind::MatMul), 6 * 2);
  EXPECT_EQ(count_ops(g, OpKind::Gelu), 2);
  EXPECT_EQ(count_ops(g, OpKind::Param), 5 + 16 * 2);
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Attention) {
      const auto& a = std::get<AttentionAttrs>(n.attrs);
      EXPECT_EQ(a.q_heads, 2);
      EXPECT_EQ(a.head_dim, 3);
      EXPECT_EQ(a.mask, MaskKind::Padding);
      EXPECT_FLOAT_EQ(a.scale, 1.f / std::sqrt(3.f));
    }
  Graph cls = build_bert_graph(c, Pooling::Cls, 2, 4, DType::BF16);
  verify(cls);
  EXPECT_EQ(cls.value(cls.outputs()[1].second).shape, (Shape{2, 6}));
  EXPECT_EQ(cls.value(cls.outputs()[1].second).dtype, DType::BF16);
  EXPECT_EQ(count_ops(cls, OpKind::Reduce), 0);
  EXPECT_THROW(build_bert_graph(c, Pooling::Mean, 1, 10, DType::F32), Error);  // seq > positions
}

TEST(BertGraph, MiniLMWeightsValidate) {
  ASSERT_TRUE(test::minilm_present());
  BertConfig c = load_bert_config(test::minilm_dir());
  Graph g = build_bert_graph(c, Pooling::Mean, 1, 16, DType::F32);
  BertWeights w(test::minilm_dir() + "/model.safetensors");
  EXPECT_NO_THROW(w.validate(g));
}

// A complete tiny checkpoint in f32, optionally with one tensor changed.
void write_tiny_checkpoint(const std::filesystem::path& file, const BertConfig& c,
                           const std::string& prefix, const std::string& drop = "",
                           const std::string& reshape = "") {
  Graph g = build_bert_graph(c, Pooling::Mean, 1, 2, DType::F32);
  std::map<std::string, std::pair<Shape, std::vector<float>>> ts;
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::Param || n.name == drop) continue;
    Shape s = g.value(n.outputs[0]).shape;
    if (n.name == reshape) s.back() += 1;
    ts[prefix + n.name] = {s, std::vector<float>(size_t(numel(s)), 0.5f)};
  }
  ts["pooler.dense.weight"] = {{6, 6}, std::vector<float>(36, 1.f)};  // present in HF files, unused
  test::write_safetensors(file, ts);
}

TEST(BertGraph, WeightErrorsNameFileAndTensor) {
  BertConfig c = tiny_config();
  Graph g = build_bert_graph(c, Pooling::Mean, 1, 3, DType::F32);
  TempDir d;
  auto file = d.path() / "model.safetensors";

  write_tiny_checkpoint(file, c, "");
  EXPECT_NO_THROW(BertWeights(file.string()).validate(g));
  write_tiny_checkpoint(file, c, "bert.");
  EXPECT_NO_THROW(BertWeights(file.string()).validate(g));

  write_tiny_checkpoint(file, c, "", "encoder.layer.1.attention.self.key.bias");
  std::string msg = error_of([&] { BertWeights(file.string()).validate(g); });
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("encoder.layer.1.attention.self.key.bias"), std::string::npos) << msg;

  write_tiny_checkpoint(file, c, "bert.", "", "encoder.layer.0.intermediate.dense.weight");
  msg = error_of([&] { BertWeights(file.string()).validate(g); });
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bert.encoder.layer.0.intermediate.dense.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[7, 7]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
