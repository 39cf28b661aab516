// A model named by its Hub id ("org/name", "org/name@revision") found where
// huggingface_hub caches downloads:
// <cache>/models--org--name/snapshots/<commit of refs/<revision>>/.
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "rlx/embedder.h"
#include "rlx/error.h"

namespace rlx {
namespace fs = std::filesystem;
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// In huggingface_hub's order: HF_HUB_CACHE (or the older HUGGINGFACE_HUB_CACHE),
// else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::vector<fs::path> hub_caches() {
  std::vector<fs::path> out;
  if (!env("HF_HUB_CACHE").empty()) out.push_back(env("HF_HUB_CACHE"));
  if (!env("HUGGINGFACE_HUB_CACHE").empty()) out.push_back(env("HUGGINGFACE_HUB_CACHE"));
  if (!env("HF_HOME").empty()) {
    out.push_back(fs::path(env("HF_HOME")) / "hub");
  } else if (!env("XDG_CACHE_HOME").empty()) {
    out.push_back(fs::path(env("XDG_CACHE_HOME")) / "huggingface" / "hub");
  } else if (!env("HOME").empty()) {
    out.push_back(fs::path(env("HOME")) / ".cache" / "huggingface" / "hub");
  }
  return out;
}

}  // namespace

bool is_hub_id(const std::string& s) {
  static const std::regex id(R"(^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[A-Za-z0-9._/-]+)?$)");
  return std::regex_match(s, id) && s.find("..") == std::string::npos;
}

std::string resolve_model_dir(const std::string& m) {
  std::error_code ec;
  if (fs::is_directory(m, ec) || fs::is_regular_file(m, ec) || !is_hub_id(m)) return m;
  std::string id = m, revision = "main";
  if (auto at = m.find('@'); at != std::string::npos) {
    id = m.substr(0, at);
    revision = m.substr(at + 1);
  }
  const std::string folder = "models--" + id.substr(0, id.find('/')) + "--" + id.substr(id.find('/') + 1);
  std::string looked;
  for (const fs::path& cache : hub_caches()) {
    const fs::path repo = cache / folder;
    // A revision is a branch or tag under refs/, or a commit named directly.
    std::string commit = revision;
    std::ifstream ref(repo / "refs" / revision);
    if (ref) std::getline(ref, commit);
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    const fs::path snap = repo / "snapshots" / commit;
    if (!commit.empty() && commit.find("..") == std::string::npos && fs::exists(snap / "config.json", ec))
      return snap.string();
    looked += "\n  " + snap.string() + (fs::exists(repo, ec) ? "" : " (no " + folder + ")");
  }
  RLX_FAIL("model '" << m << "' is not a directory and is not in the Hugging Face cache; looked in:"
                     << (looked.empty() ? std::string("\n  (no cache: HF_HUB_CACHE, HF_HOME and HOME are unset)")
                                        : looked)
                     << "\ndownload it first (e.g. huggingface-cli download " << id
                     << ") or pass its directory");
}

}  // namespace rlx
