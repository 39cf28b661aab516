// The `rlx` command line.
#include <iostream>

#include "rlx/error.h"
#include "rlx/llm.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"rlx: a compiler and runtime for transformer inference"};
  app.set_version_flag("--version", std::string("rlx ") + rlx::version());
  app.require_subcommand(1);
  add_inspect_command(app);
  add_embed_command(app);
  add_rerank_command(app);
  add_bench_command(app);
  add_forward_command(app);
  add_generate_command(app);
  add_chat_command(app);
  add_serve_command(app);
  add_tokenize_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const rlx::Error& e) {
    std::cerr << "rlx: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {  // a bug, but still a message and an exit code, not an abort
    std::cerr << "rlx: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
