// Subcommands of the `rlx` command line; rlx_main.cc registers each one.
#pragma once
#include <CLI/CLI.hpp>

void add_embed_command(CLI::App& app);
