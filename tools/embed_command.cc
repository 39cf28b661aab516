#include "tools/commands.h"
void add_embed_command(CLI::App&) {}
