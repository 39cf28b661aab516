// `rlx embed` and `rlx rerank` on files as users have them: one row per input
// line whatever the line holds, the index in every row, .npy read back,
// truncation named by line, --no-truncate keeping the rows before, the
// control flags, and models by Hub id.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"
#include "models/embedder.h"
#include "models/tiny_bert.h"  // tests/models

namespace rlx {
namespace {
namespace fs = std::filesystem;
using test::TinyBert;

std::vector<nlohmann::json> jsonl(const std::string& out) {
  std::vector<nlohmann::json> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double err = 0, mag = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    err = std::max(err, std::fabs(double(got[k]) - want[k]));
    mag = std::max(mag, std::fabs(double(got[k])));
  }
  EXPECT_LT(err, 1e-6) << what;
  EXPECT_GT(mag, 1e-3) << what << " is all zeros";
}

// float32 [rows, dim] from a .npy file, checking its header.
std::vector<std::vector<float>> read_npy(const fs::path& p, size_t dim) {
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const size_t hlen = size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8;
  const std::string header = bytes.substr(10, hlen);
  EXPECT_EQ((10 + hlen) % 64, 0u) << "numpy aligns the data to 64 bytes";
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  const size_t rows = (bytes.size() - 10 - hlen) / (4 * dim);
  EXPECT_NE(header.find("'shape': (" + std::to_string(rows) + ", " + std::to_string(dim) + ")"), std::string::npos)
      << header;
  std::vector<std::vector<float>> out(rows, std::vector<float>(dim));
  for (size_t r = 0; r < rows; ++r) std::memcpy(out[r].data(), bytes.data() + 10 + hlen + r * dim * 4, dim * 4);
  return out;
}

struct Fixture {
  test::TempDir d;
  TinyBert m{{}};
  Fixture() {
    m.write(d.path() / "model");
    test::write_sentence_modules(d.path() / "model", "mean", true);
  }
  std::string model() const { return (d.path() / "model").string(); }
};

TEST(EmbedCliRows, OneRowPerLineBlankLongAndCrlfIncluded) {
  Fixture f;
  std::string longline;
  for (int i = 0; i < 30000; ++i) longline += TinyBert::word(i % 23) + " ";  // ~100 KB
  const std::vector<std::string> lines = {"ba", "", "   ", "ba", "be ca", longline, "da fe"};
  std::string file_text;
  for (size_t i = 0; i < lines.size(); ++i) file_text += lines[i] + (i == 3 ? "\r\n" : i + 1 < lines.size() ? "\n" : "");
  test::write_text(f.d.path() / "in.txt", file_text);
  test::CliRun r = test::run_rlx("embed --device cpu --model " + f.model() + " --format jsonl --file " +
                                 (f.d.path() / "in.txt").string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto rows = jsonl(r.out);
  ASSERT_EQ(rows.size(), lines.size()) << r.out.substr(0, 400);
  Embedder e(f.model());
  auto want = e.embed(lines);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].at("index").get<size_t>(), i);
    expect_same(rows[i].at("embedding").get<std::vector<float>>(), want[i], "row " + std::to_string(i));
  }
  EXPECT_EQ(rows[0].at("embedding"), rows[3].at("embedding")) << "a duplicate (CRLF) line embeds the same";
  EXPECT_NE(r.err.find("1 of 7 sentences were longer"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 6 of " + (f.d.path() / "in.txt").string()), std::string::npos) << r.err;

  // The json format carries index and text; positional arguments come first.
  r = test::run_rlx("embed --device cpu --model " + f.model() + " \"\" be --file " + (f.d.path() / "in.txt").string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("embeddings").size(), lines.size() + 2);
  EXPECT_EQ(j["embeddings"][0]["text"], "");
  EXPECT_EQ(j["embeddings"][3]["index"], 3);
  EXPECT_EQ(j["embeddings"][3]["text"], "");
  EXPECT_NE(r.err.find("line 6 of"), std::string::npos) << r.err;
}

// Read and written a chunk at a time (--batch 2: 16 lines a chunk); each
// chunk sorts by length, so a misplaced row would show.
TEST(EmbedCliRows, ManyChunksKeepInputOrder) {
  Fixture f;
  std::vector<std::string> lines;
  std::string text;
  for (int i = 0; i < 101; ++i) {
    std::vector<int> words;
    for (int k = 0; k < (i * 7) % 13; ++k) words.push_back((i + k * 5) % 23);
    lines.push_back(TinyBert::text_of(words));
    text += lines.back() + "\n";
  }
  test::write_text(f.d.path() / "in.txt", text);
  test::CliRun r = test::run_rlx("embed --device cpu --model " + f.model() + " --batch 2 --format jsonl - < " +
                                 (f.d.path() / "in.txt").string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto rows = jsonl(r.out);
  ASSERT_EQ(rows.size(), lines.size());
  Embedder e(f.model());
  auto want = e.embed(lines);
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i]["index"].get<size_t>(), i);
    expect_same(rows[i]["embedding"].get<std::vector<float>>(), want[i], "row " + std::to_string(i));
  }
  EXPECT_NE(r.err.find("rlx embed: 96"), std::string::npos) << "progress after each chunk:\n" << r.err;
  EXPECT_NE(r.err.find("101 sentences in"), std::string::npos) << r.err;
}

TEST(EmbedCliRows, NpyOutputReadsBack) {
  Fixture f;
  const fs::path out = f.d.path() / "e.npy";
  test::CliRun r = test::run_rlx("embed --device cpu --model " + f.model() + " --batch 2 -o " + out.string() +
                                 " ba \"\" \"be ca da\" fe ba");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  auto got = read_npy(out, 20);
  Embedder e(f.model());
  auto want = e.embed({"ba", "", "be ca da", "fe", "ba"});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], want[i], "npy row " + std::to_string(i));
}

// --format table (the default on a terminal): a line per row labelled by
// its first words, then the cosine matrix labelled the same way, its values
// the library's. Without a terminal the default stays JSON.
TEST(EmbedCliRows, TableLabelsRowsAndTheSimilarityMatrix) {
  Fixture f;
  const std::vector<std::string> texts{"ba be ca da fe ba be ca da fe ba be ca", "", "fe\tba"};
  const std::string args = "embed --device cpu --model " + f.model() + " --similarity \"" + texts[0] +
                           "\" \"\" \"$(printf 'fe\\tba')\"";
  test::CliRun r = test::run_rlx(args + " --format table");
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 1u + 3 + 1 + 2 + 3) << r.out;
  EXPECT_EQ(lines[0], "model: 20 values a row, unit length");
  EXPECT_EQ(lines[1].rfind("[0] ba be ca da fe ba be ca da fe ba...  [", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("[1] (empty)  [", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("[2] fe ba  [", 0), 0u) << lines[3];
  EXPECT_EQ(lines[5], "cosine similarity");
  Embedder e(f.model());
  const auto v = e.embed(texts);
  const std::string labels[] = {"[0] ba be ca da fe ba be ca da fe ba...", "[1] (empty)", "[2] fe ba"};
  EXPECT_EQ(lines[6], std::string(labels[0].size(), ' ') + "     [0]     [1]     [2]");
  for (size_t i = 0; i < 3; ++i) {
    const std::string label = labels[i] + std::string(labels[0].size() - labels[i].size(), ' ');
    ASSERT_EQ(lines[7 + i].rfind(label, 0), 0u) << lines[7 + i];
    std::istringstream nums(lines[7 + i].substr(label.size()));
    for (size_t j = 0; j < 3; ++j) {
      double got = -9;
      nums >> got;
      EXPECT_NEAR(got, test::cosine(v[i], v[j]), 6e-5) << i << "," << j;
    }
  }
  EXPECT_NEAR(test::cosine(v[0], v[0]), 1.0, 1e-6);
  test::CliRun piped = test::run_rlx(args);  // not a terminal: JSON
  ASSERT_EQ(piped.status, 0) << piped.err;
  const auto doc = nlohmann::json::parse(piped.out);
  EXPECT_EQ(doc.at("similarity").size(), 3u);
}

TEST(EmbedCliRows, NoTruncateNamesTheLineAndKeepsTheRowsBefore) {
  Fixture f;
  std::string text;
  for (int i = 1; i <= 20; ++i) text += (i == 11 ? TinyBert::text_of(std::vector<int>(60, 2)) : "ba be") + "\n";
  const fs::path in = f.d.path() / "in.txt";
  test::write_text(in, text);
  // --batch 1 makes chunks of 8 lines: line 11 is in the second.
  const std::string base = "embed --device cpu --model " + f.model() + " --batch 1 --no-truncate --file " + in.string();
  test::CliRun r = test::run_rlx(base + " --format jsonl");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("line 11 of " + in.string() + " is longer than the model's 40 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the 10 rows before it were written"), std::string::npos) << r.err;
  auto rows = jsonl(r.out);
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_EQ(rows[9]["index"], 9);
  r = test::run_rlx(base);
  EXPECT_EQ(r.status, 1);
  auto j = nlohmann::json::parse(r.out);  // still one complete document
  EXPECT_EQ(j.at("embeddings").size(), 10u);
  const fs::path npy = f.d.path() / "e.npy";
  r = test::run_rlx(base + " -o " + npy.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(read_npy(npy, 20).size(), 10u);
}

TEST(EmbedCliRows, MaxLengthAndControlFlagsMatchTheLibrary) {
  Fixture f;
  const std::vector<std::string> texts = {"ba be ca da fe", "ga", ""};
  test::CliRun r = test::run_rlx("embed --device cpu --model " + f.model() +
                                 " --format jsonl --max-length 5 --pooling max --no-normalize --dimensions 7 "
                                 "--prompt \"he \" \"ba be ca da fe\" ga \"\"");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("longer than the model's 5 tokens and were truncated: argument 1"), std::string::npos) << r.err;
  EmbedderOptions o;
  o.max_len = 5;
  o.pooling = PoolingMode::Max;
  o.normalize = NormalizeMode::Off;
  o.truncate_dim = 7;
  o.prompt = "he ";
  Embedder e(f.model(), o);
  auto want = e.embed(texts);
  auto rows = jsonl(r.out);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) expect_same(rows[i]["embedding"].get<std::vector<float>>(), want[i], "flags row");
  // Bad values name the option.
  r = test::run_rlx("embed --device cpu --model " + f.model() + " --pooling median ba");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("median"), std::string::npos) << r.err;
  r = test::run_rlx("embed --device cpu --model " + f.model() + " --dimensions 99 ba");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("truncate_dim 99"), std::string::npos) << r.err;
  r = test::run_rlx("embed --device cpu --model " + f.model() + " --prompt-name query ba");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no prompt named 'query'"), std::string::npos) << r.err;
}

TEST(EmbedCliRows, RerankOrdersPassagesByTheLibraryScore) {
  test::TempDir d;
  test::TinyBertSpec s;
  s.classifier = true;
  TinyBert m(s);
  m.write(d.path());
  const std::vector<std::string> docs = {"ba be ca", "", "da", "fe ga he ji ka", "ba"};
  test::CliRun r = test::run_rlx("rerank --device cpu --model " + d.path().string() +
                                 " --query \"la ma\" \"ba be ca\" \"\" da \"fe ga he ji ka\" ba");
  ASSERT_EQ(r.status, 0) << r.err;
  Embedder e(d.path().string());
  auto want = e.score("la ma", docs);
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("results").size(), docs.size());
  double last = 1e9;
  for (const auto& row : j["results"]) {
    size_t i = row.at("index").get<size_t>();
    EXPECT_EQ(row.at("text").get<std::string>(), docs.at(i));
    EXPECT_NEAR(row.at("score").get<double>(), want[i], 1e-6);
    EXPECT_LE(row["score"].get<double>(), last) << "not sorted by score";
    last = row["score"].get<double>();
  }
  r = test::run_rlx("embed --device cpu --model " + d.path().string() + " ba");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cross-encoder"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rlx rerank"), std::string::npos) << r.err;
}

TEST(EmbedCliRows, ModelByHubIdFromTheCache) {
  Fixture f;
  const fs::path snap = f.d.path() / "hub" / "models--org--tiny" / "snapshots" / "abc123";
  fs::create_directories(snap.parent_path());
  fs::create_directory_symlink(f.model(), snap);
  test::write_text(f.d.path() / "hub" / "models--org--tiny" / "refs" / "main", "abc123\n");
  test::CliRun r = test::run_rlx("embed --device cpu --model org/tiny --format jsonl ba",
                                 "HF_HUB_CACHE=" + (f.d.path() / "hub").string());
  ASSERT_EQ(r.status, 0) << r.err;
  Embedder e(f.model());
  expect_same(jsonl(r.out).at(0)["embedding"].get<std::vector<float>>(), e.embed({"ba"})[0], "hub id row");
  r = test::run_rlx("embed --device cpu --model org/absent ba", "HF_HUB_CACHE=" + (f.d.path() / "hub").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("models--org--absent"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rlx
