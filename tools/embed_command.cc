#include "commands.h"

void add_embed_command(CLI::App& app) { app.add_subcommand("embed", "Embed sentences"); }
