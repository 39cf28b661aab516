#!/usr/bin/env python3
"""Decoder-family parity: `rlx generate` against Hugging Face transformers.

For each family (Llama 3 with rope_scaling llama3, Qwen2, Qwen2 with YaRN,
Qwen3, Mistral, Phi-3, Phi-3 with LongRoPE, Gemma 2, Gemma 3 text,
Qwen3-MoE, Mixtral) a
randomly initialised transformers model of odd sizes is saved with
save_pretrained (config.json + model.safetensors). The reference is greedy
decoding in float64 on the CPU from the same f32 weights, with the gap
between the two best logits at every step. rlx generates 32 greedy tokens
from the saved directory on each device and dtype; its tokens must equal the
reference's up to the first step whose top-2 gap is within the dtype's
tolerance (a near tie: either choice is right). The q/k weights are scaled
up so attention is sharp and the tokens depend on the positions: each family
must change its reference tokens when RoPE is perturbed, or the row fails
(a test blind to theta once hid a wrong one). Prints a table; exits
non-zero when any row fails.

  python3 bench/decoder_parity.py --rlx build-gpu/rlx                  # cpu f32 + cuda f32/f16/bf16
  python3 bench/decoder_parity.py --rlx build/rlx --devices cpu
  python3 bench/decoder_parity.py --rlx build-gpu/rlx --families gemma2,gemma3

The reference runs transformers' eager attention (Gemma 2's soft-capping
and the sliding windows exactly as its code writes them).
"""
import argparse
import copy
import re
import subprocess
import sys
import tempfile

import torch
import transformers

VOCAB, PROMPT, NEW = 301, 11, 32
QK_GAIN = 6.0
# A near tie: the top-2 gap within this fraction of max |logit|.
TOLERANCE = {"f32": 1e-4, "f16": 3e-2, "bf16": 6e-2}


def families():
    common = dict(vocab_size=VOCAB, num_hidden_layers=2, rms_norm_eps=1e-5, max_position_embeddings=128,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return {
        # GQA 6:2, head_dim 48, tied head; rope_scaling whose bands all show in 43 positions.
        "llama3": transformers.LlamaConfig(
            hidden_size=288, intermediate_size=776, num_attention_heads=6, num_key_value_heads=2, head_dim=48,
            tie_word_embeddings=True, rope_theta=10000.0,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 16}, **common),
        # q/k/v biases, untied head.
        "qwen2": transformers.Qwen2Config(
            hidden_size=288, intermediate_size=776, num_attention_heads=6, num_key_value_heads=2,
            tie_word_embeddings=False, rope_theta=1e6, use_sliding_window=False, **common),
        # head_dim 40 with hidden 200 over 6 heads, GQA 6:3, q/k norms.
        "qwen3": transformers.Qwen3Config(
            hidden_size=200, intermediate_size=333, num_attention_heads=6, num_key_value_heads=3, head_dim=40,
            tie_word_embeddings=True, **common),
        # A window of 64 (the context rlx then allows) past the 43 positions used.
        "mistral": transformers.MistralConfig(
            hidden_size=288, intermediate_size=776, num_attention_heads=6, num_key_value_heads=2, head_dim=48,
            sliding_window=64, tie_word_embeddings=False, **common),
        # Fused qkv_proj and gate_up_proj (head_dim 48 = 288 / 6).
        "phi3": transformers.Phi3Config(
            hidden_size=288, intermediate_size=776, num_attention_heads=6, num_key_value_heads=2,
            tie_word_embeddings=False, sliding_window=None, **common),
        # Qwen2 with YaRN (as Qwen2.5's configs write it): ramp over pairs 0..7
        # of 24, attention factor 0.1 ln 4 + 1 on cos/sin; max / original = factor,
        # so transformers versions that derive the factor from them agree.
        "qwen2-yarn": transformers.Qwen2Config(
            hidden_size=288, intermediate_size=776, num_attention_heads=6, num_key_value_heads=2,
            tie_word_embeddings=False, rope_theta=10000.0, use_sliding_window=False,
            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
            **{**common, "max_position_embeddings": 256}),
        # Phi-3 with LongRoPE: original context 64 of 256 (attention factor
        # sqrt(1 + ln 4 / ln 64)); transformers uses the short factors while the
        # sequence is within 64, rlx by the context it is given (--ctx-size 64).
        "phi3-longrope": transformers.Phi3Config(
            hidden_size=288, intermediate_size=776, num_attention_heads=6, num_key_value_heads=2,
            tie_word_embeddings=False, sliding_window=None, original_max_position_embeddings=64,
            rope_scaling={"type": "longrope", "short_factor": [1.0 + 0.1 * i for i in range(24)],
                          "long_factor": [1.0 + 2.0 * i for i in range(24)]},
            **{**common, "max_position_embeddings": 256}),
        # Gemma 2: three layers (even ones local), a window of 8 within the 43
        # positions, soft caps that bite, query_pre_attn_scalar 24 (neither
        # head_dim 40 nor hidden / heads), tied head.
        "gemma2": transformers.Gemma2Config(
            hidden_size=228, intermediate_size=333, num_attention_heads=6, num_key_value_heads=2, head_dim=40,
            query_pre_attn_scalar=24, sliding_window=8, attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
            hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
            **{**common, "num_hidden_layers": 3}),
        # Gemma 3 text: q/k norms, MQA 4:1 with head_dim 52, layers local,
        # local, global, local (pattern 3), window 8, linear rope scaling on
        # the global layer, its own base on the local ones, untied head.
        "gemma3": transformers.Gemma3TextConfig(
            hidden_size=176, intermediate_size=301, num_attention_heads=4, num_key_value_heads=1, head_dim=52,
            query_pre_attn_scalar=30, sliding_window=8, sliding_window_pattern=3,
            layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
            rope_theta=1e6, rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 4.0},
            hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=False,
            **{**common, "num_hidden_layers": 4}),
        # Qwen3-MoE: qwen3's attention, 5 experts of 37 rows, 2 per token
        # (renormalised), layer 1 dense (mlp_only_layers).
        "qwen3_moe": transformers.Qwen3MoeConfig(
            hidden_size=200, intermediate_size=333, moe_intermediate_size=37, num_experts=5, num_experts_per_tok=2,
            norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1], num_attention_heads=6,
            num_key_value_heads=3, head_dim=40, tie_word_embeddings=True, **{**common, "num_hidden_layers": 3}),
        # Mixtral: llama's attention, 5 experts of 37 rows, 2 per token, untied head.
        "mixtral": transformers.MixtralConfig(
            hidden_size=288, intermediate_size=37, num_local_experts=5, num_experts_per_tok=2, num_attention_heads=6,
            num_key_value_heads=2, head_dim=48, sliding_window=None, tie_word_embeddings=False, **common),
    }


def from_config(cfg, **kw):
    model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32, **kw)
    # Experts in float64 need the eager loop (the grouped product takes no doubles).
    if hasattr(model, "set_experts_implementation") and any("experts" in n for n, _ in model.named_parameters()):
        model.set_experts_implementation("eager")
    return model


def make_model(cfg, seed):
    torch.manual_seed(seed)
    model = from_config(cfg, attn_implementation="eager")
    with torch.no_grad():  # biases and norm gains away from their 0 / 1 init, so they matter
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "norm" in name:
                p.add_(torch.empty_like(p).uniform_(-0.2, 0.2))
            # Sharp attention, so the positions (RoPE, its scaling, theta) change
            # the tokens: at transformers' init a wrong theta went unseen.
            if any(k in name for k in ("q_proj.weight", "k_proj.weight", "qkv_proj.weight")):
                p.mul_(QK_GAIN)
            # Qwen3-MoE's per-head q/k RMSNorm undoes that gain: its norm gains carry it.
            if cfg.model_type == "qwen3_moe" and (name.endswith("q_norm.weight") or name.endswith("k_norm.weight")):
                p.mul_(QK_GAIN)
            # A decisive router, so the experts chosen differ from token to token.
            if name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight"):
                p.normal_(0.0, 0.4)
    return model.eval()


def reference(model, prompt):
    """Greedy tokens and the top-2 gap (relative to max |logit|) at each step, in float64."""
    m = model.double()
    ids, tokens, gaps = list(prompt), [], []
    with torch.no_grad():
        for _ in range(NEW):
            logits = m(torch.tensor([ids])).logits[0, -1]
            top = torch.topk(logits, 2).values
            gaps.append(float((top[0] - top[1]) / logits.abs().max()))
            tokens.append(int(logits.argmax()))
            ids.append(tokens[-1])
    model.float()
    return tokens, gaps


def rope_blind(model, cfg, prompt, want, steps):
    """True when the reference would not notice a wrong RoPE (theta x3, no
    scaling) within `steps` tokens: a row that cannot fail on positions."""
    c = copy.deepcopy(cfg)
    rp = getattr(c, "rope_parameters", None)
    def perturbed(p):  # one layer type's parameters, or {layer type: parameters} (Gemma 3)
        if "rope_theta" in p or "rope_type" in p:
            return {"rope_type": "default", "rope_theta": p.get("rope_theta", 10000.0) * 3}
        return {k: perturbed(v) for k, v in p.items()}

    if isinstance(rp, dict):  # transformers 5
        c.rope_parameters = perturbed(rp)
    else:
        c.rope_theta = getattr(c, "rope_theta", 10000.0) * 3
        c.rope_scaling = None
    torch.manual_seed(0)
    other = from_config(c).eval()
    other.load_state_dict(model.state_dict())
    tokens, _ = reference(other, prompt)
    return tokens[:steps] == want[:steps]


# rlx chooses LongRoPE's factors by its context: within the original one, the
# short factors transformers uses for these 43 positions.
RLX_ARGS = {"phi3-longrope": ["--ctx-size", "64"]}


def run_rlx(rlx, path, prompt, device, dtype, extra=()):
    cmd = [rlx, "generate", "--model", path, "--prompt-ids", ",".join(map(str, prompt)), "-n", str(NEW),
           "--ignore-eos", "--device", device, "--dtype", dtype, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return [int(t) for t in re.findall(r"-?\d+", r.stdout)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", required=True)
    ap.add_argument("--devices", default="cpu,cuda")
    ap.add_argument("--families", default=",".join(families()))
    args = ap.parse_args()
    runs = [(d, t) for d in args.devices.split(",") for t in (["f32"] if d == "cpu" else ["f32", "f16", "bf16"])]
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, cfg) in enumerate(families().items()):
            if name not in args.families.split(","):
                continue
            model = make_model(cfg, seed=1000 + i)
            path = f"{tmp}/{name}"
            model.save_pretrained(path, safe_serialization=True)
            prompt = torch.randint(0, VOCAB, (PROMPT,), generator=torch.Generator().manual_seed(i)).tolist()
            want, gaps = reference(model, prompt)
            if rope_blind(model, cfg, prompt, want, next((s for s, g in enumerate(gaps) if g <= TOLERANCE["f32"]), NEW)):
                rows.append((name, "-", "-", "-", "-", "FAIL: the reference does not see a wrong RoPE"))
                failed = True
            for device, dtype in runs:
                try:
                    got = run_rlx(args.rlx, path, prompt, device, dtype, RLX_ARGS.get(name, ()))
                except Exception as e:  # noqa: BLE001 - reported as a failed row
                    rows.append((name, device, dtype, "-", "-", f"FAIL: {e}"))
                    failed = True
                    continue
                # Tokens must agree up to the first near tie (by this dtype's tolerance).
                check = next((s for s, g in enumerate(gaps) if g <= TOLERANCE[dtype]), NEW)
                first_diff = next((s for s in range(min(len(got), NEW)) if got[s] != want[s]), None)
                ok = len(got) == NEW and (first_diff is None or first_diff >= check)
                failed |= not ok
                rows.append((name, device, dtype, f"{check}/{NEW}",
                             "none" if first_diff is None else str(first_diff), "ok" if ok else "FAIL"))
    print("| family | device | dtype | steps checked | first difference | result |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
