#!/usr/bin/env python3
"""BERT parity: `rlx forward` against Hugging Face transformers.

For each config a randomly initialised transformers.BertModel is saved with
save_pretrained; the reference last_hidden_state is computed in float64 on the
CPU from the same f32 weights. rlx runs the saved directory for every dtype and
execution mode; the error is max |rlx - ref| / max |ref| over the positions the
attention mask keeps. Prints a table; exits non-zero when any row fails.

  python3 bench/gpu_parity.py --rlx build-gpu/rlx              # GPU, all modes
  python3 bench/gpu_parity.py --rlx build/rlx --device cpu --configs odd
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import transformers

CONFIGS = {
    "base": dict(hidden=768, layers=12, heads=12, ffn=3072, batch=2, seq=128),
    "odd": dict(hidden=312, layers=4, heads=12, ffn=1200, batch=3, seq=77),
}
TOLERANCE = {"f32": 1e-4, "f16": 2e-2, "bf16": 1e-1}


def make_model(shape, seed, vocab):
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(
        vocab_size=vocab,
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        intermediate_size=shape["ffn"],
        hidden_act="gelu",
        max_position_embeddings=512,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
    )
    cfg._attn_implementation = "eager"
    model = transformers.BertModel(cfg).eval()
    # Fresh models have zero biases and unit LayerNorm gains; perturb every
    # tensor so that biases, gains and shifts all take part in the comparison.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def save_model(model, directory):
    model.save_pretrained(directory, safe_serialization=True)
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    # What the rlx loader needs to accept the directory as a BERT encoder.
    cfg["model_type"] = "bert"
    cfg["architectures"] = ["BertModel"]
    cfg.setdefault("position_embedding_type", "absolute")
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def make_inputs(shape, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    b, s = shape["batch"], shape["seq"]
    ids = torch.randint(1, vocab, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.long)
    for row in range(1, b):  # every row but the first ends in padding
        keep = max(1, s - row * (s // 4 + 3))
        mask[row, keep:] = 0
        ids[row, keep:] = 0
    return ids, mask


def reference(model, ids, mask):
    ref_model = transformers.BertModel(model.config).eval()
    ref_model.load_state_dict(model.state_dict())
    ref_model = ref_model.double()
    with torch.no_grad():
        out = ref_model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids))
    return out.last_hidden_state.numpy()


def run_rlx(rlx, model_dir, ids_file, out_file, dtype, device, mode):
    cmd = [rlx, "forward", "--model", model_dir, "--ids", ids_file, "--out", out_file,
           "--dtype", dtype, "--device", device]
    if device == "cuda":
        cmd += ["--mode", mode]
    env = dict(os.environ)
    env.pop("RLX_EXEC", None)  # the mode is the one the row names
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    secs = time.time() - t0
    return p, secs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rlx", default="build-gpu/rlx", help="the rlx binary")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--configs", default="base,odd")
    ap.add_argument("--dtypes", default=None, help="default: f32,f16 on cuda, f32 on cpu")
    ap.add_argument("--modes", default="perop,graph", help="CUDA execution modes")
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--workdir", default=None, help="keep model dirs and outputs here")
    args = ap.parse_args()

    dtypes = (args.dtypes or ("f32,f16" if args.device == "cuda" else "f32")).split(",")
    modes = args.modes.split(",") if args.device == "cuda" else ["cpu"]
    work = args.workdir or tempfile.mkdtemp(prefix="rlx_parity_")
    os.makedirs(work, exist_ok=True)
    print(f"gpu_parity: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"rlx {args.rlx}, device {args.device}, work dir {work}", flush=True)

    rows, failed = [], 0
    for ci, name in enumerate(args.configs.split(",")):
        shape = CONFIGS[name]
        model_dir = os.path.join(work, name)
        os.makedirs(model_dir, exist_ok=True)
        model = make_model(shape, seed=1234 + ci, vocab=args.vocab)
        save_model(model, model_dir)
        ids, mask = make_inputs(shape, args.vocab, seed=99 + ci)
        t0 = time.time()
        ref = reference(model, ids, mask)
        print(f"  {name}: reference (float64, cpu) in {time.time() - t0:.1f} s, "
              f"{int(mask.sum())} of {mask.numel()} positions kept", flush=True)
        ids_file = os.path.join(work, f"{name}_ids.json")
        with open(ids_file, "w") as f:
            json.dump({"input_ids": ids.tolist(), "attention_mask": mask.tolist()}, f)
        keep = mask.numpy().astype(bool)
        ref_kept = ref[keep]
        ref_max = float(np.abs(ref_kept).max())

        for dtype in dtypes:
            for mode in modes:
                out_file = os.path.join(work, f"{name}_{dtype}_{mode}.f32")
                if os.path.exists(out_file):
                    os.remove(out_file)
                p, secs = run_rlx(args.rlx, model_dir, ids_file, out_file, dtype, args.device, mode)
                row = dict(config=name, dtype=dtype, mode=mode, secs=secs, err=float("nan"),
                           tol=TOLERANCE[dtype], ran="", status="FAIL")
                if p.returncode != 0:
                    row["ran"] = "rlx failed: " + (p.stderr.strip().splitlines() or ["?"])[-1][:90]
                else:
                    got = np.fromfile(out_file, dtype="<f4")
                    m = re.search(r"mode (\w+)", p.stdout)
                    row["ran"] = m.group(1) if m else "host"
                    if got.size != ref.size:
                        row["ran"] += f" (wrote {got.size} floats, expected {ref.size})"
                    else:
                        got = got.reshape(ref.shape)[keep]
                        finite = bool(np.isfinite(got).all())
                        err = float(np.abs(got.astype(np.float64) - ref_kept).max()) / ref_max
                        row["err"] = err if finite else float("inf")
                        mode_ok = args.device != "cuda" or row["ran"] == mode
                        if finite and err <= row["tol"] and mode_ok and np.abs(got).max() > 0:
                            row["status"] = "PASS"
                        elif not mode_ok:
                            row["ran"] += " (not the mode asked for)"
                failed += row["status"] != "PASS"
                rows.append(row)
                print(f"    {name} {dtype} {mode}: {row['status']} err {row['err']:.3g} "
                      f"({row['ran']}, {secs:.1f} s)", flush=True)

    print()
    print("| config | dtype | mode | max rel err | tolerance | ran | result |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        shape = CONFIGS[r["config"]]
        desc = f"{r['config']} ({shape['hidden']}/{shape['layers']}L/{shape['heads']}h/{shape['ffn']}, " \
               f"b{shape['batch']} s{shape['seq']})"
        print(f"| {desc} | {r['dtype']} | {r['mode']} | {r['err']:.3e} | {r['tol']:.0e} | {r['ran']} | "
              f"{r['status']} |")
    print(f"\ngpu_parity: {len(rows) - failed} of {len(rows)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
