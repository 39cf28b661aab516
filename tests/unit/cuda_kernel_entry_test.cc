// Every kernel launched through cuda/launch.cuh may start while the kernel
// before it still runs (programmatic dependent launch on Hopper), so each one
// that reads the arena must call pdl_entry() before it reads anything but
// constants. A kernel without it reads its inputs early: the sampled tokens
// of the device-sampling test once parted from the host's that way. This
// checks the sources, so it runs on machines without a GPU too.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// The body (between the braces) of each __global__ function that takes the
// arena, with its name.
std::vector<std::pair<std::string, std::string>> arena_kernels(const std::string& src) {
  std::vector<std::pair<std::string, std::string>> r;
  for (size_t at = src.find("__global__"); at != std::string::npos; at = src.find("__global__", at + 1)) {
    const size_t paren = src.find('(', at), open = src.find('{', at);
    if (paren == std::string::npos || open == std::string::npos) break;
    const std::string head = src.substr(at, open - at);
    size_t name_end = paren;
    while (name_end > at && src[name_end - 1] == ' ') --name_end;
    size_t name_begin = name_end;
    while (name_begin > at && (std::isalnum(static_cast<unsigned char>(src[name_begin - 1])) || src[name_begin - 1] == '_'))
      --name_begin;
    int depth = 0;
    size_t end = open;
    for (; end < src.size(); ++end) {
      depth += src[end] == '{' ? 1 : src[end] == '}' ? -1 : 0;
      if (depth == 0) break;
    }
    if (head.find("uint8_t* arena") != std::string::npos)
      r.emplace_back(src.substr(name_begin, name_end - name_begin), src.substr(open, end - open));
  }
  return r;
}

TEST(CudaKernelEntry, EveryArenaKernelWaitsForItsPredecessor) {
  const std::filesystem::path dir = std::filesystem::path(RLX_SOURCE_DIR) / "src/backends/cuda";
  int kernels = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".cu") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    for (const auto& [name, body] : arena_kernels(ss.str())) {
      ++kernels;
      EXPECT_NE(body.find("pdl_entry()"), std::string::npos)
          << e.path().filename().string() << ": kernel " << name << " never calls pdl_entry()";
    }
  }
  EXPECT_GT(kernels, 20) << "the scan found too few kernels to be reading the sources";
}

}  // namespace
