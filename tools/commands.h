// Subcommands of the `rlx` command line, one file each.
#pragma once
#include <CLI/CLI.hpp>

void add_inspect_command(CLI::App& app);
void add_embed_command(CLI::App& app);
void add_rerank_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_forward_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
