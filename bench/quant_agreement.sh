#!/usr/bin/env bash
# Greedy tokens of quantized weights against the same weights in f32, on the
# CPU (rlx generate, the f32 product kernel for every format):
#   free-running: QUANT's own 256 tokens against f32's, token by token;
#   teacher-forced: at each step k, QUANT's next token after the prompt and
#   f32's first k tokens, against f32's token k (one run a step).
# bench/quant_agreement.sh [MODEL] ; QUANTS="fp8 q8_0" STEPS=256 PROMPT="..."
set -uo pipefail
cd "$(dirname "$0")/.."
RLX=${RLX:-build/rlx}
MODEL=${1:-models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf}
STEPS=${STEPS:-256}
PROMPT=${PROMPT:-The history of the Roman Empire}
export RLX_CPU_QUANT_KERNEL=f32  # a GGUF's own Q4_1 is then held in f32: --quantize decides every product
ids=$("$RLX" tokenize --model "$MODEL" "$PROMPT" 2>/dev/null | awk '{print $1}' | paste -sd,)
[ -n "$ids" ] || { echo "quant_agreement: could not tokenize the prompt with $MODEL" >&2; exit 1; }
gen() { "$RLX" generate --model "$MODEL" --device cpu "$@" --ignore-eos 2>/dev/null | tr -d '\n'; }
ref=$(gen --prompt-ids "$ids" -n "$STEPS")
IFS=, read -ra r <<<"$ref"
[ "${#r[@]}" -eq "$STEPS" ] || { echo "quant_agreement: the f32 run gave ${#r[@]} tokens, not $STEPS" >&2; exit 1; }
for q in ${QUANTS:-fp8 q8_0}; do
  IFS=, read -ra o <<<"$(gen --quantize "$q" --prompt-ids "$ids" -n "$STEPS")"
  free=0 first=-1 forced=0
  for k in $(seq 0 $((STEPS - 1))); do
    if [ "${o[$k]:-}" = "${r[$k]}" ]; then free=$((free + 1)); elif [ $first -lt 0 ]; then first=$k; fi
    prefix=$ids
    [ "$k" -gt 0 ] && prefix="$ids,$(IFS=,; echo "${r[*]:0:$k}")"
    [ "$(gen --quantize "$q" --prompt-ids "$prefix" -n 1)" = "${r[$k]}" ] && forced=$((forced + 1))
  done
  echo "$q against f32 ($(basename "$MODEL"), $STEPS steps): teacher-forced $forced equal; free-running $free equal, first difference at step $first"
done
