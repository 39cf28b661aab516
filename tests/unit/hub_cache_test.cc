// Models named by Hub id, found in a Hugging Face cache laid out as
// huggingface_hub lays it out (blobs linked from snapshots/<commit>/), and
// the error that lists where it looked.
#include <gtest/gtest.h>

#include <cstdlib>

#include "models/embedder.h"
#include "models/tiny_bert.h"  // tests/models

namespace rlx {
namespace {
namespace fs = std::filesystem;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value.empty()) ::unsetenv(name);
    else ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// models--org--name/{blobs, refs/main, snapshots/<commit>/<file> -> ../../blobs/<hash>}
fs::path write_cached_model(const fs::path& cache, const std::string& folder, const std::string& commit,
                            const test::TinyBert& m) {
  test::TempDir staging;
  m.write(staging.path());
  const fs::path repo = cache / folder;
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / commit);
  test::write_text(repo / "refs" / "main", commit);  // no newline, as huggingface_hub writes it
  int n = 0;
  for (const auto& e : fs::directory_iterator(staging.path())) {
    const std::string blob = "blob" + std::to_string(n++);
    fs::copy_file(e.path(), repo / "blobs" / blob);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / blob, repo / "snapshots" / commit / e.path().filename());
  }
  return repo / "snapshots" / commit;
}

TEST(HubCache, IdsResolveToTheSnapshotThatRefsMainNames) {
  test::TempDir home;
  test::TinyBert m({});
  const fs::path cache = home.path() / "hub";
  const fs::path snap = write_cached_model(cache, "models--sentence-transformers--tiny-Bert_x", "3f9a1c", m);
  // A stale snapshot beside it must not be picked.
  fs::create_directories(cache / "models--sentence-transformers--tiny-Bert_x" / "snapshots" / "000old");
  {
    ScopedEnv env("HF_HUB_CACHE", cache.string());
    EXPECT_EQ(resolve_model_dir("sentence-transformers/tiny-Bert_x"), snap.string());
    EXPECT_EQ(resolve_model_dir("sentence-transformers/tiny-Bert_x@3f9a1c"), snap.string());
    Embedder e(resolve_model_dir("sentence-transformers/tiny-Bert_x"));
    auto v = e.embed({test::TinyBert::text_of({1, 2})});
    auto ids = m.ids_of({1, 2});
    auto want = m.pool(m.hidden(ids, std::vector<int32_t>(ids.size(), 0)), "mean");
    ASSERT_EQ(v[0].size(), want.size());
    for (size_t d = 0; d < want.size(); ++d) EXPECT_NEAR(v[0][d], want[d], 2e-5) << d;
  }
  {
    ScopedEnv unset("HF_HUB_CACHE", "");
    ScopedEnv legacy("HUGGINGFACE_HUB_CACHE", "");
    ScopedEnv env("HF_HOME", home.path().string());
    EXPECT_EQ(resolve_model_dir("sentence-transformers/tiny-Bert_x"), snap.string());
  }
  // A path that exists, or that is no Hub id, is left alone.
  EXPECT_EQ(resolve_model_dir(home.path().string()), home.path().string());
  EXPECT_EQ(resolve_model_dir("/no/such/dir"), "/no/such/dir");
  EXPECT_FALSE(is_hub_id("../x"));
  EXPECT_FALSE(is_hub_id("a/b/c"));
  EXPECT_TRUE(is_hub_id("BAAI/bge-small-en-v1.5"));
}

TEST(HubCache, AbsentModelListsWhereItLooked) {
  test::TempDir home;
  ScopedEnv env("HF_HUB_CACHE", (home.path() / "hub").string());
  ScopedEnv hf_home("HF_HOME", (home.path() / "hfhome").string());
  std::string msg = test::error_of([] { resolve_model_dir("intfloat/multilingual-e5-small"); });
  EXPECT_NE(msg.find("intfloat/multilingual-e5-small"), std::string::npos) << msg;
  EXPECT_NE(msg.find((home.path() / "hub" / "models--intfloat--multilingual-e5-small").string()), std::string::npos)
      << msg;
  EXPECT_NE(msg.find((home.path() / "hfhome" / "hub").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("looked in"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
