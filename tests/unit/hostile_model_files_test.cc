// Model folders as a hostile download could make them: wrong JSON types,
// sizes that wrap or never end, paths that leave the folder, tensors named
// twice, ids out of range. Each must give an rlx::Error naming the file and
// the field, quickly; never an abort, a hang or a silently different model.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>

#include "models/bert.h"
#include "models/embedder.h"
#include "models/hf_config.h"
#include "models/json_read.h"
#include "models/safetensors.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"
#include "tokenizers/wordpiece.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;
using test::write_text;

void expect_error(const std::string& msg, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(msg.empty()) << "no error";
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

std::string bert_config(const std::string& extra) {
  return R"({"model_type":"bert","hidden_size":384,"num_attention_heads":12,"num_hidden_layers":6,)"
         R"("intermediate_size":1536)" + extra + "}";
}

TEST(HostileConfig, WrongTypesAndSizesNameTheField) {
  TempDir d;
  auto err = [&](const std::string& json) {
    write_text(d.path() / "config.json", json);
    return error_of([&] { load_bert_config(d.path().string()); });
  };
  expect_error(err(bert_config(R"(,"hidden_size":4294967680)")), {"config.json", "hidden_size", "outside"});
  expect_error(err(bert_config(R"(,"hidden_size":384.9)")), {"hidden_size", "384.9 is not an integer"});
  expect_error(err(bert_config(R"(,"hidden_size":1e300)")), {"hidden_size", "outside"});
  expect_error(err(bert_config(R"(,"vocab_size":-5)")), {"vocab_size", "outside"});
  expect_error(err(bert_config(R"(,"num_attention_heads":0)")), {"num_attention_heads", "outside"});
  expect_error(err(bert_config(R"(,"layer_norm_eps":1e300)")), {"layer_norm_eps", "outside"});
  expect_error(err(bert_config(R"(,"hidden_act":7)")), {"hidden_act", "must be a string"});
  expect_error(err(bert_config(R"(,"architectures":[5])")), {"architectures[0]", "must be a string"});
  expect_error(err(bert_config(R"(,"pad_token_id":40000)")), {"pad_token_id", "outside [0, 30521]"});
  expect_error(err("[1, 2]"), {"config.json", "must be a JSON object, not array"});
  // Layers that would take hours to build fail at once.
  auto t0 = std::chrono::steady_clock::now();
  expect_error(err(bert_config(R"(,"num_hidden_layers":2147483647)")), {"num_hidden_layers", "outside [1, 1024]"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  // A config.json that is a directory.
  fs::remove(d.path() / "config.json");
  fs::create_directories(d.path() / "config.json");
  expect_error(error_of([&] { load_bert_config(d.path().string()); }), {"config.json", "not a regular file"});
}

TEST(HostileConfig, SentenceTransformersFilesOfTheWrongShape) {
  TempDir d;
  auto err = [&](const std::string& modules) {
    write_text(d.path() / "modules.json", modules);
    return error_of([&] { load_sentence_config(d.path().string()); });
  };
  expect_error(err("[1]"), {"modules.json", "[0]: must be a JSON object, not number"});
  expect_error(err("[null]"), {"modules.json", "[0]: must be a JSON object, not null"});
  expect_error(err(R"([{"type": 5, "path": "x"}])"), {"[0].type: must be a string"});
  expect_error(err(R"({"type": "x"})"), {"modules.json", "must be a JSON array, not object"});
  expect_error(err(R"([{"path": "1_Pooling"}])"), {"[0].type: is required"});

  const std::string pooling = R"([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}])";
  write_text(d.path() / "1_Pooling" / "config.json", "[true]");
  expect_error(err(pooling), {"1_Pooling/config.json", "must be a JSON object, not array"});
  write_text(d.path() / "1_Pooling" / "config.json", R"({"pooling_mode_cls_token": "yes"})");
  expect_error(err(pooling), {"pooling_mode_cls_token: must be true or false, not string"});

  write_text(d.path() / "modules.json", "[]");
  write_text(d.path() / "sentence_bert_config.json", R"({"max_seq_length": 1e300})");
  expect_error(error_of([&] { load_sentence_config(d.path().string()); }),
               {"sentence_bert_config.json", "max_seq_length", "outside"});
}

TEST(HostileConfig, ModulePathsStayInsideTheModelFolder) {
  TempDir outside;
  write_text(outside.path() / "config.json", R"({"pooling_mode_cls_token": true})");
  TempDir d;
  auto err = [&](const std::string& path) {
    write_text(d.path() / "modules.json",
               R"([{"type": "sentence_transformers.models.Pooling", "path": ")" + path + "\"}]");
    return error_of([&] { load_sentence_config(d.path().string()); });
  };
  expect_error(err("/"), {"modules.json", "path '/' must be relative to the model folder"});
  expect_error(err(outside.path().string()), {"must be relative"});
  expect_error(err("../" + outside.path().filename().string()), {"climbs out of the model folder"});
  expect_error(err("1_Pooling/../../x"), {"climbs out of the model folder"});
  // A folder inside that is a link to one outside.
  fs::create_directory_symlink(outside.path(), d.path() / "linked");
  expect_error(err("linked"), {"leads out of the model folder"});
  // The ordinary case still reads the module's config.
  write_text(d.path() / "1_Pooling" / "config.json", R"({"pooling_mode_cls_token": true})");
  write_text(d.path() / "modules.json",
             R"([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}])");
  EXPECT_EQ(load_sentence_config(d.path().string()).pooling, Pooling::Cls);
}

TEST(HostileSafetensors, TensorNamedTwiceIsAnError) {
  TempDir d;
  auto p = d.path() / "m.safetensors";
  test::write_safetensors_raw(p,
                              R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                              std::string(8, '\0'));
  expect_error(error_of([&] { SafetensorsFile f(p.string()); }), {"m.safetensors", "'a' is named twice"});
}

TEST(HostileSafetensors, DuplicateCheckIsLinearInTheNames) {
  // 50 000 names, the last one repeated: the duplicate check ran over the
  // parent object per entry (quadratic: 100 s in a release build); one pass
  // finds it in well under a second (a few under the sanitizers).
  TempDir d;
  auto p = d.path() / "m.safetensors";
  std::string header = "{";
  const int n = 50000;
  for (int i = 0; i < n; ++i)
    header += std::string(i ? "," : "") + "\"t" + std::to_string(i) + R"(":{"dtype":"F32","shape":[1],"data_offsets":[)" +
              std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
  test::write_safetensors_raw(p, header + R"(,"t7":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                              std::string(size_t(4 * n), '\0'));
  auto t0 = std::chrono::steady_clock::now();
  expect_error(error_of([&] { SafetensorsFile g(p.string()); }), {"m.safetensors", "'t7' is named twice"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

TEST(HostileSafetensors, DirectoriesAndFifosAreRefusedWithoutWaiting) {
  TempDir d;
  std::filesystem::create_directories(d.path() / "dir.safetensors");
  expect_error(error_of([&] { SafetensorsFile f((d.path() / "dir.safetensors").string()); }),
               {"dir.safetensors' is not a regular file"});
  const auto fifo = d.path() / "fifo.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error(error_of([&] { SafetensorsFile f(fifo.string()); }), {"fifo.safetensors' is not a regular file"});
  expect_error(error_of([&] { read_json_file(fifo); }), {"fifo.safetensors' is not a regular file"});
}

TEST(HostileSafetensors, OffsetsAndDimsMustBeIntegers) {
  TempDir d;
  auto p = d.path() / "m.safetensors";
  auto err = [&](const std::string& entry) {
    test::write_safetensors_raw(p, R"({"w":)" + entry + "}", std::string(16, '\0'));
    return error_of([&] { SafetensorsFile f(p.string()); });
  };
  expect_error(err(R"({"dtype":"F32","shape":[1],"data_offsets":[0.5,1e300]})"), {"tensor 'w'", "data_offsets[0]"});
  expect_error(err(R"({"dtype":"F32","shape":[1],"data_offsets":[0,1e300]})"), {"tensor 'w'", "data_offsets[1]"});
  expect_error(err(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,4]})"), {"tensor 'w'", "outside"});
  expect_error(err(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"), {"tensor 'w'", "shape[0]"});
  expect_error(err(R"({"dtype":5,"shape":[1],"data_offsets":[0,4]})"), {"tensor 'w'", "dtype: must be a string"});
  expect_error(err(R"({"dtype":"F32","shape":{"a":1},"data_offsets":[0,4]})"), {"tensor 'w'", "must be a JSON array"});
}

TEST(HostileSafetensors, OverlapHiddenBehindAnEmptyTensorIsFound) {
  TempDir d;
  auto p = d.path() / "m.safetensors";
  test::write_safetensors_raw(p,
                              R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                              R"("b":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                              R"("c":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                              std::string(16, '\0'));
  expect_error(error_of([&] { SafetensorsFile f(p.string()); }), {"'a' and 'c' overlap"});
}

TEST(HostileSafetensors, EmptyTensorConvertsToNothing) {
  TempDir d;
  auto p = d.path() / "m.safetensors";
  test::write_safetensors_raw(p,
                              R"({"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                              R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                              std::string("\0\0\x80\x3f", 4));
  SafetensorsFile f(p.string());
  EXPECT_TRUE(f.to_f32("e").empty());
  EXPECT_EQ(f.to_f32("x"), std::vector<float>{1.f});
}

// tokenizer.json with its vocabulary entries replaced.
std::string tokenizer_json(const std::string& vocab_extra, const std::string& model_extra = "") {
  return R"({"model":{"type":"WordPiece","vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2,"[PAD]":3,"a":4)" + vocab_extra +
         "}" + model_extra + "}}";
}

TEST(HostileTokenizer, VocabularyIdsMustBeSmallNonNegativeIntegers) {
  TempDir d;
  auto p = d.path() / "tokenizer.json";
  auto err = [&](const std::string& json) {
    write_text(p, json);
    return error_of([&] { WordPiece::from_tokenizer_json(p.string()); });
  };
  EXPECT_EQ(err(tokenizer_json("")), "");
  expect_error(err(tokenizer_json(R"(,"b":-5)")), {"tokenizer.json", "model.vocab.\"b\"", "outside"});
  expect_error(err(tokenizer_json(R"(,"b":1e300)")), {"model.vocab.\"b\"", "outside"});
  expect_error(err(tokenizer_json(R"(,"b":4294967301)")), {"model.vocab.\"b\"", "outside"});
  expect_error(err(tokenizer_json(R"(,"b":7.5)")), {"model.vocab.\"b\"", "not an integer"});
  expect_error(err(tokenizer_json("", R"(,"max_input_chars_per_word":1000000000)")),
               {"max_input_chars_per_word", "outside [1, 1024]"});
  expect_error(err(R"({"model":[1]})"), {"model: must be a JSON object"});
  expect_error(err(R"([])"), {"tokenizer.json", "must be a JSON object"});
  expect_error(err(tokenizer_json("") + R"(x)"), {"not valid JSON"});
  write_text(p, tokenizer_json(""));
  std::string with_added = tokenizer_json("");
  with_added.insert(with_added.size() - 1, R"(,"added_tokens":[{"content":5}])");
  expect_error(err(with_added), {"added_tokens[0].content: must be a string"});
  fs::remove(p);
  fs::create_directories(p);
  expect_error(error_of([&] { WordPiece::from_dir(d.path().string()); }), {"tokenizer.json", "not a regular file"});
}

TEST(HostileTokenizer, IdsBeyondTheModelsVocabularyAreRefused) {
  ASSERT_TRUE(test::minilm_present());
  TempDir d;
  // Linked files, as in Hugging Face's cache (folders are real there).
  for (const char* f : {"config.json", "model.safetensors", "modules.json", "sentence_bert_config.json",
                        "1_Pooling/config.json"}) {
    fs::create_directories((d.path() / f).parent_path());
    fs::create_symlink(fs::path(test::minilm_dir()) / f, d.path() / f);
  }
  // A tokenizer whose ids reach past the 30522 rows of the embedding table.
  write_text(d.path() / "tokenizer.json", tokenizer_json(R"(,"b":40000)"));
  expect_error(error_of([&] { Embedder e(d.path().string()); }),
               {"tokenizer gives ids up to 40000", "vocab_size is 30522"});
}

TEST(HostileWeights, ConfigThatDisagreesWithTheWeightsFailsBeforeBuilding) {
  ASSERT_TRUE(test::minilm_present());
  BertConfig c = load_bert_config(test::minilm_dir());
  BertWeights w(test::minilm_dir() + "/model.safetensors");
  EXPECT_EQ(error_of([&] { w.check_sizes(c); }), "");
  BertConfig more = c;
  more.num_hidden_layers = 1024;
  expect_error(error_of([&] { w.check_sizes(more); }), {"model.safetensors", "encoder.layer.1023", "1024 layers"});
  BertConfig wide = c;
  wide.vocab_size = 30000;
  expect_error(error_of([&] { w.check_sizes(wide); }), {"word_embeddings", "[30522, 384]", "[30000, 384]"});
}

}  // namespace
}  // namespace rlx
