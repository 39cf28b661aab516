// Parsing of the options several subcommands share.
#pragma once
#include <string>

#include "rlx/session.h"

rlx::DType dtype_option(const std::string& s);     // f32 | f16 | bf16
rlx::Device device_option(const std::string& s);   // auto | cpu | cuda (cuda must be present)
rlx::ExecMode mode_option(const std::string& s);   // auto | perop | graph
