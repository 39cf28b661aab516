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
