// Runs the `rlx` command line as a user does: stdout captured, stderr from a
// file, the exit status.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "models/test_files.h"

namespace rlx::test {

struct CliRun {
  int status = -1;
  std::string out, err;
};

// `env` is put before the command ("HF_HUB_CACHE=/x").
inline CliRun run_rlx(const std::string& args, const std::string& env = "") {
  CliRun r;
  TempDir dir;
  const std::string err_path = (dir.path() / "stderr").string();
  std::string cmd = env + (env.empty() ? "" : " ") + std::string(RLX_CLI_PATH) + " " + args + " 2>" + err_path;
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

}  // namespace rlx::test
