// The embedder's declaration is public: include/rlx/embedder.h.
#pragma once
#include "rlx/embedder.h"
