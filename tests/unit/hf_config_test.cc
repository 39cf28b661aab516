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
  // The mode by name, as newer sentence-transformers write it.
  write_text(d.path() / "1_Pooling/config.json", R"({"embedding_dimension":8,"pooling_mode":"max"})");
  EXPECT_EQ(load_sentence_config(d.path().string()).pooling, Pooling::Max);
  write_text(d.path() / "1_Pooling/config.json", R"({"pooling_mode":["cls"]})");
  EXPECT_EQ(load_sentence_config(d.path().string()).pooling, Pooling::Cls);
  write_text(d.path() / "1_Pooling/config.json", R"({"pooling_mode":["cls","mean"]})");
  msg = error_of([&] { load_sentence_config(d.path().string()); });
  EXPECT_NE(msg.find("concatenated pooling modes"), std::string::npos) << msg;
  write_text(d.path() / "1_Pooling/config.json", R"({"pooling_mode":"median"})");
  msg = error_of([&] { load_sentence_config(d.path().string()); });
  EXPECT_NE(msg.find("'median'"), std::string::npos) << msg;
}

TEST(HfConfig, ErrorsNameTheFile) {
  TempDir d;
  auto cfg = d.path() / "config.json";
  write_text(cfg, R"({"model_type":"gpt2","architectures":["GPT2LMHeadModel"]})");
  std::string msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GPT2LMHeadModel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsupported architecture"), std::string::npos) << msg;

  // GTE v1.5's config: its code is the model's own (auto_map), refused as such.
  write_text(cfg, R"({"model_type":"new","architectures":["NewModel"],"auto_map":{"AutoModel":"Alibaba-NLP/new-impl--modeling.NewModel"}})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("'NewModel' (model_type 'new') (its modeling code comes with the model: auto_map"),
            std::string::npos) << msg;

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

TEST(HfConfig, EncoderFamiliesReadTheirOwnKeys) {
  TempDir d;
  auto cfg = d.path() / "config.json";
  write_text(cfg, R"({"model_type":"distilbert","architectures":["DistilBertModel"],"dim":48,"n_layers":3,)"
                  R"("n_heads":4,"hidden_dim":77,"activation":"relu","vocab_size":99,"max_position_embeddings":33})");
  BertConfig c = load_bert_config(d.path().string());
  EXPECT_EQ(c.family, EncoderFamily::DistilBert);
  EXPECT_EQ(c.hidden_size, 48);
  EXPECT_EQ(c.num_hidden_layers, 3);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.intermediate_size, 77);
  EXPECT_EQ(c.hidden_act, Activation::Relu);
  EXPECT_EQ(c.type_vocab_size, 0);
  EXPECT_EQ(c.max_tokens(), 33);
  EXPECT_FALSE(c.classifier);

  write_text(cfg, R"({"model_type":"distilbert","sinusoidal_pos_embds":true})");
  std::string msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("sinusoidal_pos_embds"), std::string::npos) << msg;

  write_text(cfg, R"({"model_type":"roberta","architectures":["RobertaForSequenceClassification"],)"
                  R"("max_position_embeddings":514,"pad_token_id":1,"type_vocab_size":1,"vocab_size":50265,)"
                  R"("id2label":{"0":"A","1":"B","2":"C"}})");
  c = load_bert_config(d.path().string());
  EXPECT_EQ(c.family, EncoderFamily::Roberta);
  EXPECT_EQ(c.position_offset, 2);
  EXPECT_EQ(c.max_tokens(), 512);
  EXPECT_TRUE(c.classifier);
  EXPECT_EQ(c.num_labels, 3);
  EXPECT_EQ(c.score_activation, BertConfig::ScoreActivation::Identity);  // more than one label

  // XLM-R: RoBERTa's graph, positions after padding_idx 1, one token type.
  write_text(cfg, R"({"model_type":"xlm-roberta","architectures":["XLMRobertaForSequenceClassification"],)"
                  R"("max_position_embeddings":514,"pad_token_id":1,"type_vocab_size":1,"vocab_size":250002,)"
                  R"("hidden_size":1024,"num_attention_heads":16})");
  c = load_bert_config(d.path().string());
  EXPECT_EQ(c.family, EncoderFamily::Roberta);
  EXPECT_EQ(c.model_type, "xlm-roberta");
  EXPECT_EQ(c.max_tokens(), 512);
  EXPECT_EQ(c.vocab_size, 250002);
  EXPECT_TRUE(c.classifier);
  EXPECT_EQ(c.score_activation, BertConfig::ScoreActivation::Sigmoid);

  // NomicBERT: nomic's own keys; the vocabulary padded up; no classifier.
  write_text(cfg, R"({"model_type":"nomic_bert","architectures":["NomicBertModel"],"vocab_size":30522,)"
                  R"("pad_vocab_size_multiple":64,"n_embd":768,"n_head":12,"n_layer":12,"n_inner":3072,)"
                  R"("n_positions":8192,"rotary_emb_fraction":1.0,"rotary_emb_base":1000,)"
                  R"("activation_function":"swiglu","qkv_proj_bias":false,"mlp_fc1_bias":false,)"
                  R"("mlp_fc2_bias":false,"rotary_scaling_factor":2,"max_trained_positions":2048})");
  c = load_bert_config(d.path().string());
  EXPECT_EQ(c.family, EncoderFamily::NomicBert);
  EXPECT_EQ(c.vocab_size, 30528);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.max_tokens(), 2048);  // past it the scaling factor would change the rotary base
  EXPECT_FLOAT_EQ(c.nomic.rotary_base, 1000.f);
  EXPECT_FALSE(c.nomic.qkv_bias);
  EXPECT_EQ(c.nomic.gate_act, Activation::Silu);

  // ModernBERT in transformers 4's keys: layers whose index is not a
  // multiple of global_attn_every_n_layers are local, a null local theta is
  // the global one; no token types, positions only rotary.
  write_text(cfg, R"({"model_type":"modernbert","architectures":["ModernBertForMaskedLM"],"vocab_size":50368,)"
                  R"("hidden_size":64,"num_attention_heads":4,"num_hidden_layers":4,"intermediate_size":96,)"
                  R"("global_attn_every_n_layers":3,"global_rope_theta":160000,"local_rope_theta":null,)"
                  R"("local_attention":128,"max_position_embeddings":8192,"norm_eps":1e-5})");
  c = load_bert_config(d.path().string());
  EXPECT_EQ(c.family, EncoderFamily::ModernBert);
  EXPECT_EQ(c.modernbert.local, (std::vector<bool>{false, true, true, false}));
  EXPECT_FLOAT_EQ(c.modernbert.global_theta, 160000.f);
  EXPECT_FLOAT_EQ(c.modernbert.local_theta, 160000.f);
  EXPECT_EQ(c.modernbert.local_attention, 128);
  EXPECT_EQ(c.type_vocab_size, 0);
  EXPECT_EQ(c.max_tokens(), 8192);
  EXPECT_FALSE(c.modernbert.norm_bias);

  // Another family's architecture under a model_type, and families rlx does not run.
  write_text(cfg, R"({"model_type":"roberta","architectures":["BertModel"]})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("'BertModel' (model_type 'roberta')"), std::string::npos) << msg;
  write_text(cfg, R"({"model_type":"xlm-roberta","architectures":["RobertaModel"]})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("'RobertaModel' (model_type 'xlm-roberta')"), std::string::npos) << msg;
  write_text(cfg, R"({"model_type":"modernbert","architectures":["ModernBertForTokenClassification"]})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("'ModernBertForTokenClassification' (model_type 'modernbert')"), std::string::npos) << msg;
  write_text(cfg, R"({"model_type":"bert","architectures":["BertForQuestionAnswering"]})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("BertForQuestionAnswering"), std::string::npos) << msg;
  write_text(cfg, R"({"model_type":"bert","architectures":["BertForSequenceClassification"],)"
                  R"("problem_type":"multi_label_classification"})");
  msg = error_of([&] { load_bert_config(d.path().string()); });
  EXPECT_NE(msg.find("multi_label_classification"), std::string::npos) << msg;
}

TEST(HfConfig, SentenceTransformersPrompts) {
  TempDir d;
  write_text(d.path() / "config_sentence_transformers.json",
             R"({"prompts":{"query":"query: ","passage":"passage: "},"default_prompt_name":"query"})");
  SentenceConfig s = load_sentence_config(d.path().string());
  ASSERT_EQ(s.prompts.size(), 2u);
  EXPECT_EQ(s.default_prompt_name, "query");
  for (const auto& [name, text] : s.prompts) EXPECT_EQ(text, name + ": ");
  write_text(d.path() / "config_sentence_transformers.json", R"({"prompts":{"query":7}})");
  std::string msg = error_of([&] { load_sentence_config(d.path().string()); });
  EXPECT_NE(msg.find("config_sentence_transformers.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("query"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
