// Reading config.json and the sentence-transformers files.
#include "models/hf_config.h"

#include <gtest/gtest.h>

#include "test_util.h"

#include <functional>

#include "models/test_files.h"  // tests/models

namespace rlx {
namespace {

using test::error_of;

using test::TempDir;
using test::write_text;


TEST(HfConfig, ReadsMiniLM) {
  ASSERT_TRUE(test::minilm_present());
  BertConfig c = load_bert_config(test::minilm_dir());
  EXPECT_EQ(c.model_type, "bert");
  EXPECT_EQ(c.hidden_size, 384);
  EXPECT_EQ(c.num_hidden_layers, 6);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.hidden_act, Activation::Gelu);
  EXPECT_FLOAT_EQ(c.layer_norm_eps, 1e-12f);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.type_vocab_size, 2);
  EXPECT_EQ(c.vocab_size, 30522);
  SentenceConfig s = load_sentence_config(test::minilm_dir());
  EXPECT_TRUE(s.present);
  EXPECT_EQ(s.pooling, Pooling::Mean);
  EXPECT_TRUE(s.normalize);
  EXPECT_EQ(s.max_seq_length, 256);
}

TEST(HfConfig, ActivationsAndDefaults) {
  TempDir d;
  write_text(d.path() / "config.json",
             R"({"model_type":"bert","architectures":["BertForMaskedLM"],"hidden_size":64,)"
             R"("num_attention_heads":4,"hidden_act":"gelu_new","num_hidden_layers":1,"intermediate_size":7})");
  BertConfig c = load_bert_config(d.path().string());
  EXPECT_EQ(c.hidden_act, Activation::GeluTanh);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 7);
  EXPECT_EQ(c.max_position_embeddings, 512);
  SentenceConfig s = load_sentence_config(d.path().string());
  EXPECT_FALSE(s.present);
  EXPECT_FALSE(s.normalize);
  EXPECT_EQ(s.pooling, Pooling::Mean);
}

TEST(HfConfig, ClsPoolingWithoutNormalize) {
  TempDir d;
  write_text(d.path() / "modules.json",
             R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)"
             R"({"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])");
  write_text(d.path() / "1_Pooling/config.json",
             R"({"pooling_mode_cls_token":true,"pooling_mode_mean_tokens":false})");
  SentenceConfig s = load_sentence_config(d.path().string());
  EXPECT_TRUE(s.present);
  EXPECT_EQ(s.pooling, Pooling::Cls);
  EXPECT_FALSE(s.normalize);
  write_text(d.path() / "1_Pooling/config.json", R"({"pooling_mode_max_tokens":true})");
  EXPECT_EQ(load_sentence_config(d.path().string()).pooling, Pooling::Max);
  write_text(d.path() / "1_Pooling/config.json", R"({"pooling_mode_lasttoken":true})");
  EXPECT_EQ(load_sentence_config(d.path().string()).pooling, Pooling::LastToken);
  // Two modes at once would concatenate in sentence-transformers.
  write_text(d.path() / "1_Pooling/config.json",
             R"({"pooling_mode_max_tokens":true,"pooling_mode_mean_tokens":true})");
  std::string msg = error_of([&] { load_sentence_config(d.path().string()); });
  EXPECT_NE(msg.find("concatenated pooling modes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1_Pooling"), std::string::npos) << msg;
}

TEST(HfConfig, ErrorsNameTheFile) {
  TempDir d;
  auto cfg = d.path() / "config.json";
  write_text(cfg, R"({"model_type":"gpt2","architectures":["GPT2LMHeadModel"]})");
  std::string msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GPT2LMHeadModel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsupported architecture"), std::string::npos) << msg;

  write_text(cfg, R"({"model_type":"bert","architectures":["RobertaModel"]})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("RobertaModel"), std::string::npos) << msg;

  write_text(cfg, R"({"model_type":"bert","hidden_act":"mish"})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("mish"), std::string::npos) << msg;

  write_text(cfg, R"({"model_type":"bert","hidden_size":100,"num_attention_heads":3})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("multiple"), std::string::npos) << msg;

  write_text(cfg, R"({"model_type": "bert", )");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;

  msg = error_of([&] { load_bert_config((d.path() / "absent").string()); });
  EXPECT_NE(msg.find("absent"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
