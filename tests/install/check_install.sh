#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/embed_sentence
# against it with find_package(rlx), and embeds a sentence with the default
# model: dimension 384, unit norm. Exit 77 (skipped) when the model is absent.
#   check_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
model=$src/models/all-MiniLM-L6-v2
[ -f "$model/model.safetensors" ] || { echo "no model at $model: run scripts/setup"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/rlx/embedder.h"
test -f "$tmp/prefix/lib/cmake/rlx/rlxConfig.cmake"
cmake -S "$src/examples/embed_sentence" -B "$tmp/example" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/example" >/dev/null
out=$("$tmp/example/embed_sentence" "$model" "The house stands on clean layers.")
echo "$out"
echo "$out" | grep -Eq '^dim 384 norm 1\.0000 first -?[0-9]+\.[0-9]+$'
# The first component is a real number, not an unwritten zero.
! echo "$out" | grep -Eq 'first -?0\.000000$'
# Text generation through the installed package: the default decoder model
# answers through its chat template.
gen_model=$src/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
test -f "$tmp/prefix/include/rlx/llm.h"
test -f "$tmp/prefix/lib/cmake/rlx/rlxConfigVersion.cmake"
if [ -f "$gen_model" ]; then
  cmake -S "$src/examples/generate_text" -B "$tmp/gen" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
  cmake --build "$tmp/gen" >/dev/null
  gen=$("$tmp/gen/generate_text" "$gen_model" "What is the capital of France?" 24)
  echo "$gen"
  # Some text, then the last line: a finish reason and a positive token count.
  [ "$(echo "$gen" | head -c 200 | tr -d '[:space:]' | wc -c)" -gt 10 ]
  echo "$gen" | tail -1 | grep -Eq '^finish (stop|eos|length), [1-9][0-9]* tokens, rlx 0\.2\.0$'
fi
