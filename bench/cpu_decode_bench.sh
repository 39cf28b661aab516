#!/usr/bin/env bash
# CPU generation speed on one GGUF file: rlx at 1 and 2 threads, 128 prompt
# tokens then 64 decoded (--ignore-eos), ROUNDS rounds alternating with the
# other binaries given, plus the machine's streaming read bandwidth, so the
# decode rate can be put as a fraction of it (decode reads every weight once
# a token).
#
#   bench/cpu_decode_bench.sh [MODEL.gguf]
# Environment:
#   RLX=build/rlx          the binary measured
#   RLX_BASE=path          a second rlx (e.g. an older build) run alternately
#   LLAMA_BENCH=path       llama.cpp's llama-bench, run alternately (-p 128; -n 64 -d 128)
#   ROUNDS=3 THREADS="1 2"
#   RLX_WARMUP=--warmup    an untimed run of the prompt first (llama-bench warms up too); '' for an rlx without the flag
#   RLX_CPU_QUANT_KERNEL=f32   the f32 kernel instead of the integer ones (the default, auto)
#
# llama-bench from the source llama-cpp-python vendors (the sdist on PyPI):
#   tar xf llama_cpp_python-*.tar.gz; cd llama_cpp_python-*/vendor/llama.cpp
#   cmake -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release \
#     -DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
#     -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
#   cmake --build build --target llama-bench -j2
# (the AMX flags: a processor that lists AMX under a kernel that does not
# grant it runs a native build into an illegal instruction)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf}
RLX=${RLX:-build/rlx}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-"1 2"}
[ -f "$MODEL" ] || { echo "no model file $MODEL" >&2; exit 1; }
[ -x "$RLX" ] || { echo "no rlx binary $RLX (build it first)" >&2; exit 1; }

# 128 prompt ids spread over the first 31100 ids (inside both a 32000- and a
# 49152-token vocabulary), the same every run.
IDS=$(python3 -c "print(','.join(str((i * 7919) % 31000 + 100) for i in range(128)))")

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo "model: $MODEL ($(du -m "$MODEL" | cut -f1) MB)"

BW=$(mktemp -d)
trap 'rm -rf "$BW"' EXIT
c++ -O2 -march=native -fopenmp bench/mem_read_bandwidth.cc -o "$BW/bw"
"$BW/bw" "$(( $(du -m "$MODEL" | cut -f1) ))" 1
"$BW/bw" 1024 1
"$BW/bw" 1024 2

run_rlx() {  # binary threads -> "prefill_tok_s decode_tok_s"
  "$1" generate --model "$MODEL" --device cpu --threads "$2" --prompt-ids "$IDS" -n 64 --ignore-eos ${RLX_WARMUP---warmup} 2>&1 >/dev/null |
    sed -n 's/.*prompt [0-9]* tokens, \([0-9.]*\) tok\/s; decode [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1 \2/p'
}
# llama.cpp's prefill from an empty context (pp128), its decode after a
# 128-token context (tg64 at -d 128): positions 128-192, the ones rlx's 64
# decode steps after the 128-token prompt take.
llama_rate() {  # threads args... -> tokens/s of the one test
  local t=$1
  shift
  "$LLAMA_BENCH" -m "$MODEL" -t "$t" -r 1 -o csv "$@" 2>/dev/null |
    awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i ~ /avg_ts/) c = i; next }
             { gsub(/"/, ""); v = $c } END { print v }'
}
run_llama() {  # threads -> "prefill_tok_s decode_tok_s"
  echo "$(llama_rate "$1" -p 128 -n 0) $(llama_rate "$1" -p 0 -n 64 -d 128)"
}

printf '%-8s %-7s %-5s %14s %14s\n' what threads round "prefill tok/s" "decode tok/s"
for t in $THREADS; do
  for r in $(seq "$ROUNDS"); do
    read -r p d < <(run_rlx "$RLX" "$t")
    printf '%-8s %-7s %-5s %14s %14s\n' rlx "$t" "$r" "$p" "$d"
    if [ -n "${RLX_BASE:-}" ]; then
      read -r p d < <(run_rlx "$RLX_BASE" "$t")
      printf '%-8s %-7s %-5s %14s %14s\n' rlx-base "$t" "$r" "$p" "$d"
    fi
    if [ -n "${LLAMA_BENCH:-}" ]; then
      read -r p d < <(run_llama "$t")
      printf '%-8s %-7s %-5s %14s %14s\n' llama.cpp "$t" "$r" "$p" "$d"
    fi
  done
done
