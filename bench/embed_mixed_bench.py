#!/usr/bin/env python3
"""What sorting a mixed-length corpus by length buys: rlx.SentenceEncoder on
N lines of 3-120 words, sorted into length buckets (the default) against
the input order (RLX_EMBED_SORT=0, padded to each chunk's longest line),
each in its own process, warmed on the whole corpus once (every bucket it
needs compiled), then the best of --reps timed encodes; the two orders
alternate for --rounds. Sentences per second, and the largest difference
between the two runs' rows (they must agree: padding never changes a row).

    python3 bench/embed_mixed_bench.py --model models/all-MiniLM-L6-v2 --device cpu --batch 32 --threads 1
    python3 bench/embed_mixed_bench.py --device cuda --dtype f16 --batch 128   # a random MiniLM-shaped model
    python3 bench/embed_mixed_bench.py --device cuda --dtype f16 --batch 128 --shape bert-base

Needs the rlx package importable (PYTHONPATH or an installed wheel); with
no --model, torch, transformers and tokenizers write the random model.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np


SHAPES = {"minilm": dict(hidden=384, layers=6, heads=12, ffn=1536),
          "bert-base": dict(hidden=768, layers=12, heads=12, ffn=3072)}


def corpus(model_dir, n, seed):
    vocab = json.load(open(os.path.join(model_dir, "tokenizer.json")))["model"]["vocab"]
    pool = sorted(w for w in vocab if w.isalpha() and w.islower() and len(w) > 1)
    rng = random.Random(seed)
    return [" ".join(rng.choice(pool) for _ in range(rng.randint(3, 120))) for _ in range(n)]


def child(a):
    import rlx

    texts = corpus(a.model, a.lines, a.seed)
    kw = {"device": a.device, "dtype": a.dtype}
    if a.threads:
        kw["threads"] = a.threads
    enc = rlx.SentenceEncoder(a.model, **kw)
    enc.encode(texts, batch_size=a.batch)  # every bucket this corpus needs, compiled
    best, rows = None, None
    for _ in range(a.reps):
        t = time.perf_counter()
        rows = enc.encode(texts, batch_size=a.batch)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    np.save(a.child, np.asarray(rows, dtype=np.float32))
    print(json.dumps({"seconds": best}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a sentence-transformers directory (default: a random one shaped by --shape)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="minilm",
                    help="the random model's shape: minilm (6 x 384) or bert-base (12 x 768)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)

    tmp = tempfile.TemporaryDirectory()
    if not a.model:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from python_vs_st import make_minilm_shaped

        a.model = os.path.join(tmp.name, "model")
        os.makedirs(a.model)
        make_minilm_shaped(a.model, random.Random(1234), **SHAPES[a.shape])
    texts = corpus(a.model, a.lines, a.seed)
    words = [len(t.split()) for t in texts]
    print(f"{a.lines} lines of {min(words)}-{max(words)} words (mean {sum(words) / len(words):.1f}), "
          f"{a.model}, {a.device} {a.dtype}, batch {a.batch}" + (f", {a.threads} threads" if a.threads else ""))
    times = {"sorted": [], "input order": []}
    rows = {}
    for _ in range(a.rounds):
        for label, sort in (("input order", "0"), ("sorted", "1")):
            out = os.path.join(tmp.name, label.replace(" ", "_") + ".npy")
            argv = [sys.executable, os.path.abspath(__file__), "--child", out, "--model", a.model, "--device", a.device,
                    "--dtype", a.dtype, "--batch", str(a.batch), "--threads", str(a.threads), "--lines",
                    str(a.lines), "--reps", str(a.reps), "--seed", str(a.seed)]
            r = subprocess.run(argv, env={**os.environ, "RLX_EMBED_SORT": sort}, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{label} run failed:\n{r.stderr[-2000:]}")
            times[label].append(json.loads(r.stdout.strip().splitlines()[-1])["seconds"])
            rows[label] = np.load(out)
    diff = float(np.abs(rows["sorted"] - rows["input order"]).max())
    assert rows["sorted"].shape == (a.lines, rows["sorted"].shape[1]), rows["sorted"].shape
    assert np.abs(rows["sorted"]).max() > 0, "all-zero rows"
    print("| order | seconds (each round) | sentences/s (best) |")
    print("|---|---|---|")
    for label in ("input order", "sorted"):
        ts = times[label]
        print(f"| {label} | {' / '.join(f'{t:.3f}' for t in ts)} | {a.lines / min(ts):.0f} |")
    print(f"sorted / input order: {min(times['input order']) / min(times['sorted']):.2f}x sentences/s; "
          f"rows max |diff| {diff:.2e}")


if __name__ == "__main__":
    main()
