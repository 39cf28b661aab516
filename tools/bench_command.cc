#include "tools/commands.h"
void add_bench_command(CLI::App&) {}
