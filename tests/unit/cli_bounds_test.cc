// The `rlx` command line given hostile flags, ids and model folders: each
// ends with a clear message and exit status 1, never a signal or a hang.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "models/test_files.h"  // tests/models

namespace rlx {
namespace {

namespace fs = std::filesystem;

struct Ran {
  int status = -1;  // exit status; -1 when killed by a signal
  std::string out, err;
  double seconds = 0;
};

Ran rlx_cli(const std::string& args) {
  Ran r;
  test::TempDir dir;
  const std::string err_path = (dir.path() / "stderr").string();
  std::string cmd = std::string(RLX_CLI_PATH) + " " + args + " 2>" + err_path + " </dev/null";
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

void expect_refused(const std::string& args, const std::string& says) {
  Ran r = rlx_cli(args);
  EXPECT_EQ(r.status, 1) << "rlx " << args << "\n" << r.err;
  EXPECT_NE(r.err.find("rlx: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << "rlx " << args << ": '" << says << "' not in\n" << r.err;
}

TEST(CliBounds, InspectAndBenchRefuseImpossibleShapes) {
  expect_refused("inspect --heads 0", "heads 0 is outside");
  expect_refused("inspect --hidden 96 --heads 5", "hidden 96 is not a multiple of heads 5");
  expect_refused("inspect --layers -1", "layers -1 is outside");
  expect_refused("inspect --seq 0", "--seq 0 is outside");
  expect_refused("inspect --batch 100000", "--batch 100000 is outside [1, 1024]");
  expect_refused("inspect --batch 1024 --seq 4096", "more than 2^20 tokens");
  expect_refused("bench --runs 0 --layers 1 --hidden 32 --heads 2 --ffn 64 --seq 8", "--runs 0 is outside");
  expect_refused("bench --warmup -1 --layers 1", "--warmup -1 is outside");
}

TEST(CliBounds, EmbedRefusesBatchesOutOfRange) {
  ASSERT_TRUE(test::minilm_present());
  const std::string m = " --device cpu --model " + test::minilm_dir();
  expect_refused("embed" + m + " --batch 2048 hello", "--batch 2048 is outside [1, 1024]");
  expect_refused("embed" + m + " --batch 0 hello", "--batch 0 is outside");
  expect_refused("embed" + m + " --batch 3 hello", "max_batch 3 must be a power of two");
}

// A --ids file for `rlx forward`.
std::string ids_file(const fs::path& dir, const std::string& json) {
  test::write_text(dir / "ids.json", json);
  return (dir / "ids.json").string();
}

TEST(CliBounds, ForwardRefusesIdsAndMasksOutOfRange) {
  ASSERT_TRUE(test::minilm_present());
  test::TempDir d;
  const std::string base = "forward --model " + test::minilm_dir() + " --out " + (d.path() / "h.bin").string() + " --ids ";
  // 2^32 + 7592 once read as 7592; 2^32 as a mask once read as 0.
  expect_refused(base + ids_file(d.path(), R"({"input_ids": [[101, 4294974888, 102]]})"),
                 "input_ids[0][1]: 4294974888 is outside [0, 30521]");
  expect_refused(base + ids_file(d.path(), R"({"input_ids": [[101, 30522, 102]]})"), "30522 is outside [0, 30521]");
  expect_refused(base + ids_file(d.path(), R"({"input_ids": [[101, -1, 102]]})"), "-1 is outside");
  expect_refused(base + ids_file(d.path(), R"({"input_ids": [[101, 7592.5, 102]]})"), "7592.5 is not an integer");
  expect_refused(base + ids_file(d.path(), R"({"input_ids": [[101, 7592, 102]], "attention_mask": [[1, 4294967296, 1]]})"),
                 "attention_mask[0][1]: 4294967296 is outside [0, 1]");
  expect_refused(base + ids_file(d.path(), R"({"input_ids": [[101, 7592, 102]], "token_type_ids": [[0, 2, 0]]})"),
                 "token_type_ids[0][1]: 2 is outside [0, 1]");
  expect_refused(base + ids_file(d.path(), R"({"input_ids": [[101, 7592], [102]]})"), "input_ids[1]: has 1 entries");
  expect_refused(base + ids_file(d.path(), R"([[101]])"), "must be a JSON object, not array");
  // The good file still runs.
  Ran ok = rlx_cli(base + ids_file(d.path(), R"({"input_ids": [[101, 7592, 102]], "attention_mask": [[1, 1, 1]]})"));
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(fs::file_size(d.path() / "h.bin"), 3u * 384 * 4);
}

// A model folder of MiniLM's files, linked, with `name` replaced by `content`.
void hostile_model(const fs::path& dir, const std::string& name, const std::string& content) {
  for (const char* f : {"config.json", "model.safetensors", "modules.json", "sentence_bert_config.json",
                        "tokenizer.json", "1_Pooling/config.json"}) {
    fs::create_directories((dir / f).parent_path());
    if (name != f) fs::create_symlink(fs::path(test::minilm_dir()) / f, dir / f);
  }
  test::write_text(dir / name, content);
}

std::string minilm_config_with(const std::string& key, const std::string& value) {
  std::ifstream in(test::minilm_dir() + "/config.json");
  std::string s(std::istreambuf_iterator<char>(in), {});
  size_t at = s.find("\"" + key + "\"");
  if (at == std::string::npos) return s;
  size_t colon = s.find(':', at), end = s.find_first_of(",}", colon);
  return s.substr(0, colon + 1) + " " + value + s.substr(end);
}

TEST(CliBounds, HostileModelFoldersFailFast) {
  ASSERT_TRUE(test::minilm_present());
  {
    test::TempDir d;
    hostile_model(d.path(), "config.json", minilm_config_with("num_hidden_layers", "2147483647"));
    Ran r = rlx_cli("inspect --model " + d.path().string());
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("num_hidden_layers: 2147483647 is outside [1, 1024]"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 10.0);
  }
  {
    test::TempDir d;
    hostile_model(d.path(), "config.json", minilm_config_with("num_hidden_layers", "7"));
    expect_refused("inspect --model " + d.path().string(), "has no tensor 'encoder.layer.6.intermediate.dense.weight'");
    expect_refused("embed --device cpu --model " + d.path().string() + " hello", "encoder.layer.6");
  }
  {
    // Fewer layers than the file holds: the sixth would silently not run.
    test::TempDir d;
    hostile_model(d.path(), "config.json", minilm_config_with("num_hidden_layers", "5"));
    expect_refused("embed --device cpu --model " + d.path().string() + " hello",
                   "tensor 'encoder.layer.5.");
    expect_refused("embed --device cpu --model " + d.path().string() + " hello",
                   "num_hidden_layers 5 (weights the config does not use)");
  }
  {
    test::TempDir d;
    hostile_model(d.path(), "config.json", minilm_config_with("hidden_size", "4294967680"));
    expect_refused("embed --device cpu --model " + d.path().string() + " hello", "hidden_size: 4294967680 is outside");
  }
  for (const char* path : {"/", "..", "../../etc"}) {
    test::TempDir d;
    hostile_model(d.path(), "modules.json",
                  std::string(R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)") +
                      R"({"idx":1,"name":"1","path":")" + path + R"(","type":"sentence_transformers.models.Pooling"}])");
    expect_refused("embed --device cpu --model " + d.path().string() + " hello", "model folder");
  }
  {
    test::TempDir d;
    hostile_model(d.path(), "modules.json", R"([{"idx":0,"type":5}])");
    expect_refused("embed --device cpu --model " + d.path().string() + " hello", "modules.json': [0].type: must be a string");
  }
  {
    test::TempDir d;
    hostile_model(d.path(), "1_Pooling/config.json", R"({"pooling_mode_mean_tokens": "true"})");
    expect_refused("embed --device cpu --model " + d.path().string() + " hello", "pooling_mode_mean_tokens: must be true or false");
  }
}

TEST(CliBounds, LongInputsWarnOnceOrFailWithNoTruncate) {
  ASSERT_TRUE(test::minilm_present());
  test::TempDir d;
  // Three lines: two far past the model's 256 tokens (one a megabyte of [CLS]), one short.
  std::string huge;
  for (int i = 0; i < 200000; ++i) huge += "[CLS]";
  std::string words;
  for (int i = 0; i < 400; ++i) words += "word ";
  test::write_text(d.path() / "in.txt", huge + "\nshort line\n" + words + "\n");
  const std::string args = "embed --device cpu --format compact --model " + test::minilm_dir() + " --file " +
                           (d.path() / "in.txt").string();
  Ran r = rlx_cli(args);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  const std::string warn = "warning: 2 of 3 sentences were longer than the model's 256 tokens and were truncated";
  size_t at = r.err.find(warn);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(warn, at + 1), std::string::npos) << "warned more than once:\n" << r.err;
  EXPECT_LT(r.seconds, 600.0);  // quadratic, as it was, the [CLS] line alone took ~25 minutes

  Ran strict = rlx_cli(args + " --no-truncate");
  EXPECT_EQ(strict.status, 1) << strict.err;
  // Named by its line in the file, not by its place in a batch.
  EXPECT_NE(strict.err.find("line 1 of " + (d.path() / "in.txt").string() +
                            " is longer than the model's 256 tokens (--no-truncate)"),
            std::string::npos)
      << strict.err;
  Ran quiet = rlx_cli("embed --device cpu --no-truncate --model " + test::minilm_dir() + " \"short line\"");
  EXPECT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("warning"), std::string::npos) << quiet.err;
}

std::string tiny_llama() { return std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf"; }

TEST(CliBounds, GenerateFlagsOutsideTheirDomain) {
  const std::string g = "generate --device cpu --threads 1 --model " + tiny_llama() + " ";
  const std::pair<std::string, std::string> bad[] = {{"--temperature -1", "--temperature: -1 must be >= 0"},
                                                     {"--threads -5", "--threads: -5 must be >= 0"},
                                                     {"-n -3", "-n: -3 must be >= 0"},
                                                     {"--temperature nan", "nan must be >= 0"}};
  for (const auto& [flag, says] : bad) {
    Ran r = rlx_cli(g + flag + " --prompt-ids 1,2");
    EXPECT_GT(r.status, 0) << flag << "\n" << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << flag << ": '" << says << "' not in\n" << r.err;
  }
  expect_refused(g + "--prompt-ids 1,2,", "--prompt-ids: '1,2,' has an empty item");
  expect_refused(g + "--prompt-ids 1,,2", "has an empty item");
  expect_refused(g + "--prompt-ids ,1", "has an empty item");
  expect_refused(g + "--batch 1000000 --prompt-ids 1,2", "--batch must be in [1, 1024]");
}

TEST(CliBounds, GenerateSaysWhenTheContextEndsTheReply) {
  // The tiny model's context holds 64 tokens.
  Ran r = rlx_cli("generate --device cpu --threads 1 --ignore-eos -n 100 --prompt-ids 1,2,3 --model " + tiny_llama());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("-n 100 with a prompt of 3 tokens is more than the context holds (64 tokens"),
            std::string::npos)
      << r.err;
}

TEST(CliBounds, ArenasLargerThanTheMachineAreRefusedBeforeTheyAreAllocated) {
  // The tiny model with a context of 2^24 tokens: 64 sequences of it need
  // a KV cache of terabytes, refused before anything is allocated.
  std::ifstream in(tiny_llama(), std::ios::binary);
  std::string b((std::istreambuf_iterator<char>(in)), {});
  const std::string key = "llama.context_length";
  const size_t at = b.find(key);
  ASSERT_NE(at, std::string::npos);
  uint32_t type = 0, ctx = uint32_t(1) << 24;
  std::memcpy(&type, b.data() + at + key.size(), 4);
  ASSERT_EQ(type, 4u);  // u32
  std::memcpy(b.data() + at + key.size() + 4, &ctx, 4);
  test::TempDir d;
  const fs::path p = d.path() / "long_context.gguf";
  test::write_text(p, b);
  Ran r = rlx_cli("generate --device cpu --threads 1 --ctx-size 16777216 --batch 64 -n 2 --prompt-ids 1,2 --model " +
                  p.string());
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("cpu: the graph asks for an arena of"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("this machine has"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 30.0);
}

}  // namespace
}  // namespace rlx
