#include "tools/cli_options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "rlx/error.h"

CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != '\0') return "'" + s + "' is not a number";
        if (!std::isfinite(v) || v < 0) return s + " must be >= 0";
        return "";
      },
      "NUMBER >= 0");
}

rlx::DType dtype_option(const std::string& s) {
  if (s == "f32") return rlx::DType::F32;
  if (s == "f16") return rlx::DType::F16;
  if (s == "bf16") return rlx::DType::BF16;
  RLX_FAIL("--dtype must be f32, f16 or bf16, not '" << s << "'");
}

rlx::Device device_option(const std::string& s) {
  if (s == "cpu") return rlx::Device::Cpu;
  if (s == "cuda" || s.rfind("cuda:", 0) == 0) {
    device_index_option(s);  // a well-formed index
    RLX_CHECK(rlx::cuda_available(), "--device " << s << ": no CUDA device, or rlx was built without CUDA");
    return rlx::Device::Cuda;
  }
  RLX_CHECK(s == "auto", "--device must be auto, cpu, cuda or cuda:N, not '" << s << "'");
  return rlx::cuda_available() ? rlx::Device::Cuda : rlx::Device::Cpu;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

int gpu_index_option(const std::string& option, const std::string& e) {
  const std::string n = e.rfind("cuda:", 0) == 0 ? e.substr(5) : e;
  RLX_CHECK(!n.empty() && n.size() <= 3 && n.find_first_not_of("0123456789") == std::string::npos,
            option << ": '" << e << "' is not a GPU index (0, cuda:1)");
  return std::stoi(n);
}

int device_index_option(const std::string& s) {
  return s.rfind("cuda:", 0) == 0 ? gpu_index_option("--device", s) : 0;
}

CLI::Validator device_choices() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s == "cpu" || s == "cuda" || s == "auto") return "";
        if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() <= 8 &&
            s.find_first_not_of("0123456789", 5) == std::string::npos)
          return "";
        return "--device must be auto, cpu, cuda or cuda:N, not '" + s + "'";
      },
      "cpu|cuda|cuda:N|auto");
}

bool int8_option(const std::string& quantize) {
  RLX_CHECK(quantize.empty() || quantize == "int8", "--quantize must be int8, not '" << quantize << "'");
  return quantize == "int8";
}

rlx::Device device_option(const std::string& device, bool int8) {
  if (!int8) return device_option(device);
  RLX_CHECK(device.rfind("cuda", 0) != 0, "--quantize int8 runs on the CPU only; use --device cpu (or f16/bf16 on the GPU)");
  return rlx::Device::Cpu;
}

rlx::ExecMode mode_option(const std::string& s) {
  if (s == "perop") return rlx::ExecMode::PerOp;
  if (s == "graph") return rlx::ExecMode::Graph;
  RLX_CHECK(s == "auto", "--mode must be auto, perop or graph, not '" << s << "'");
  return rlx::ExecMode::Auto;
}

void check_count(const char* option, int64_t value, int64_t lo, int64_t hi) {
  RLX_CHECK(value >= lo && value <= hi, option << " " << value << " is outside [" << lo << ", " << hi << "]");
}

void check_batch_seq(int64_t batch, int64_t seq) {
  check_count("--batch", batch, 1, 1024);
  check_count("--seq", seq, 1, 65536);
  RLX_CHECK(batch * seq <= (int64_t(1) << 20),
            "--batch " << batch << " x --seq " << seq << " is more than 2^20 tokens in one run");
}

namespace {
namespace fs = std::filesystem;

std::string default_decoder_model() {
  std::vector<fs::path> tried;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back(exe.parent_path() / ".." / "models" / kDefaultDecoderModel);
  tried.push_back(fs::path("models") / kDefaultDecoderModel);
  std::string where;
  for (const auto& p : tried) {
    if (fs::is_regular_file(p)) return p.string();
    where += " " + p.string();
  }
  RLX_FAIL("no model found (looked in:" << where << "); run scripts/setup, or pass --model FILE.gguf");
}

}  // namespace

std::string default_embed_model_dir() {
  if (const char* env = std::getenv("RLX_MODEL_DIR"); env && *env) return env;
  std::vector<fs::path> tried;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back(exe.parent_path() / ".." / "models" / "all-MiniLM-L6-v2");
  tried.push_back(fs::path("models") / "all-MiniLM-L6-v2");
  for (const auto& p : tried)
    if (fs::exists(p / "config.json")) return fs::weakly_canonical(p).string();
  std::string where;
  for (const auto& p : tried) where += " " + p.string();
  RLX_FAIL("no model directory found (looked in:" << where
                                                  << "); run scripts/setup, or pass --model DIR "
                                                     "or set RLX_MODEL_DIR");
}

std::string decoder_model_path(const std::string& m) {
  if (m.empty()) return default_decoder_model();
  if (!fs::is_directory(m) || fs::exists(fs::path(m) / "config.json")) return m;
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(m))
    if (e.path().extension() == ".gguf") found.push_back(e.path());
  RLX_CHECK(found.size() == 1, "--model '" << m << "': expected one .gguf file in the directory, found "
                                           << found.size() << " and no config.json");
  return found[0].string();
}
