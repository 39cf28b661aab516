// `rlx generate` as a user runs it: greedy text equal to the NumPy
// reference's, seeded sampling repeatable, ChatML prompts, and errors.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/test_files.h"  // tests/models
#include "tokenizers/bpe.h"

namespace rlx {
namespace {

const std::string kSmolLM2 =
    std::string(RLX_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Ran {
  int status = -1;
  std::string out, err;
};

Ran run_generate(const std::string& args, const std::string& model = kSmolLM2) {
  Ran r;
  test::TempDir dir;
  const std::string err_path = (dir.path() / "stderr").string();
  // One thread: ctest runs tests side by side on CI's two cores.
  std::string cmd = std::string(RLX_CLI_PATH) + " generate --threads 1 --model " + model + " " + args + " 2>" +
                    err_path;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

TEST(GenerateCli, GreedyTextIsTheReferenceContinuation) {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/smollm2_reference.json");
  auto ref = nlohmann::json::parse(in);
  GgufFile f(kSmolLM2);
  BpeTokenizer tok = BpeTokenizer::from_gguf(f);
  auto ids = ref.at("generated_ids").get<std::vector<int32_t>>();
  ids.resize(6);
  Ran r = run_generate("--device cpu -n 6 --prompt \"" + ref.at("prompt").get<std::string>() + "\"");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, tok.decode(ids) + "\n");
  EXPECT_NE(r.err.find("prompt 5 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode 5 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("KV cache: 5 decode steps"), std::string::npos) << r.err;  // the cached path ran
  // The full-prefix recompute writes the same text.
  Ran full = run_generate("--device cpu --recompute -n 6 --prompt \"" + ref.at("prompt").get<std::string>() + "\"");
  ASSERT_EQ(full.status, 0) << full.err;
  EXPECT_EQ(full.out, r.out);
  EXPECT_NE(full.err.find("full-prefix recompute: 0 decode steps"), std::string::npos) << full.err;
}

TEST(GenerateCli, SeededSamplingRepeats) {
  const std::string args = "-n 3 --temperature 0.9 --top-k 40 --top-p 0.95 --seed 11 --prompt \"Once upon\"";
  Ran a = run_generate(args), b = run_generate(args);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_GT(a.out.size(), 1u);
  EXPECT_EQ(a.out, b.out);
}

TEST(GenerateCli, ChatWrapsThePromptInChatML) {
  Ran r = run_generate("-n 1 --chat --prompt \"Hi!\"");
  ASSERT_EQ(r.status, 0) << r.err;
  // The default system turn, the user turn and the assistant's opening.
  EXPECT_NE(r.err.find("prompt 32 tokens"), std::string::npos) << r.err;
}

TEST(GenerateCli, ErrorsNameTheProblem) {
  Ran r = run_generate("--prompt hi", "/nonexistent/x.gguf");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("/nonexistent/x.gguf"), std::string::npos) << r.err;
  r = run_generate("--prompt hi --top-p 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("top-p"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rlx
