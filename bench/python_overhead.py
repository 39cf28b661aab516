#!/usr/bin/env python3
"""What the Python layer costs, on this machine's CPU:

- encode: rlx.SentenceEncoder.encode of 2000 sentences (8-40 words) at batch
  32 against `rlx embed --batch 32` on the same sentences (its own timing line:
  embedding only, no load, no output). Both cold (a fresh model: the buckets
  compile inside the timed call, as in the CLI) and, for Python, warm.
- generation: per-token time of a streamed reply (one Python iteration per
  piece) and of a whole reply, against rlx_engine_bench (the C++ API driving
  the engine, batch 1), on the tiny test model (where a token takes little
  time, so the overhead shows) and on the default SmolLM2; wall clock, and
  the process's CPU time for the two Python paths.

    python3 bench/python_overhead.py [--cli build/rlx] [--engine-bench build/rlx_engine_bench] [--threads 1]

Build rlx_engine_bench with `ninja -C build rlx_engine_bench`; the rlx wheel
must be installed (scripts/test-python makes build-python/venv).
"""

import argparse
import os
import pathlib
import random
import re
import subprocess
import tempfile
import time

import rlx

ROOT = pathlib.Path(__file__).resolve().parents[1]


def sentences(n, seed=7):
    rng = random.Random(seed)
    vocab = ("the a of to and in is was for on that with as by at from his her it an be this which or are had "
             "not but were they have one all their been has more when will would who there so if out about can "
             "model graph kernel memory fused operator tensor compile runtime device latency batch token "
             "sentence embedding vector river mountain city music garden history science winter ocean").split()
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(8, 40))).capitalize() + "." for _ in range(n)]


def encode_bench(cli, threads, reps):
    texts = sentences(2000)
    model = str(ROOT / "models" / "all-MiniLM-L6-v2")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(texts) + "\n")
        path = f.name
    # Alternating, so that other work on the machine weighs on both alike.
    cli_s, cold, warm = [], [], []
    for _ in range(reps):
        r = subprocess.run([cli, "embed", "--model", model, "--device", "cpu", "--batch", "32", "--threads",
                            str(threads), "--format", "compact", "--file", path], capture_output=True, text=True,
                           check=True)
        cli_s.append(float(re.search(r"2000 sentences in ([0-9.]+) s", r.stderr).group(1)))
        enc = rlx.SentenceEncoder(model, device="cpu", threads=threads)
        t = time.perf_counter()
        enc.encode(texts, batch_size=32)
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        enc.encode(texts, batch_size=32)
        warm.append(time.perf_counter() - t)
        del enc
    os.unlink(path)
    c, p, w = min(cli_s), min(cold), min(warm)
    print("encode, 2000 sentences of 8-40 words, batch 32, all-MiniLM-L6-v2 f32, CPU, "
          f"threads {threads or 'all cores'}, best of {reps} (alternating):")
    print("| | s | sentences/s | vs CLI |")
    print("|---|---|---|---|")
    print(f"| rlx embed (CLI) | {c:.3f} | {2000 / c:.0f} | 1.00 |")
    print(f"| SentenceEncoder.encode, fresh model | {p:.3f} | {2000 / p:.0f} | {p / c:.3f} |")
    print(f"| SentenceEncoder.encode, warm | {w:.3f} | {2000 / w:.0f} | {w / c:.3f} |")


def engine_ids(s, n, vocab):
    """rlx_engine_bench's prompt_ids(s, n, vocab)."""
    return [1 + (s * 7919 + i * 31) % (vocab - 1) for i in range(n)]


def per_token_python(llm, prompt, new, reps):
    """Per token, streamed and whole, in wall-clock and in process CPU seconds:
    (time for `new` tokens - time for 8) / (new - 8), so that the prefill and
    the request's setup cancel; the best of `reps`, alternating. CPU time is
    the steadier measure while other work shares the cores."""

    def whole(n):
        g = llm.generate(prompt, max_tokens=n, ignore_eos=True)
        assert g.completion_tokens == n

    def streamed(n):
        s = llm.generate(prompt, max_tokens=n, ignore_eos=True, stream=True)
        for _ in s:
            pass
        assert s.result.completion_tokens == n

    runs = {(f, n, c): [] for f in (streamed, whole) for n in (8, new) for c in ("wall", "cpu")}
    for _ in range(reps):
        for f in (streamed, whole):
            for n in (8, new):
                w, c = time.perf_counter(), time.process_time()
                f(n)
                runs[f, n, "wall"].append(time.perf_counter() - w)
                runs[f, n, "cpu"].append(time.process_time() - c)
    return {(f.__name__, c): (min(runs[f, new, c]) - min(runs[f, 8, c])) / (new - 8)
            for f in (streamed, whole) for c in ("wall", "cpu")}


def per_token_cpp(engine_bench, model, threads, prompt, new, ctx, reps):
    best = None
    for _ in range(reps):
        r = subprocess.run([engine_bench, model, "--seqs", "1", "--prompt", str(prompt), "--new", str(new), "--ctx",
                            str(ctx), "--stagger", "1", "--alone", "0", "--threads", str(threads)],
                           capture_output=True, text=True, check=True)
        tok_s = float(re.search(r"batch 1, depth \d+: .*? decode \d+ tokens (\d+) tok/s", r.stdout).group(1))
        best = max(best or 0, tok_s)
    return 1 / best


def generation_bench(engine_bench, threads, reps):
    print()
    print(f"generation, batch 1, greedy, CPU, {threads or 'all'} thread(s), best of {reps}: time per token after "
          "the first (rlx_engine_bench prints whole tok/s)")
    print("| model | C++ API wall us | Python whole reply wall us | Python streamed wall us | "
          "Python whole reply CPU us | Python streamed CPU us | streamed - whole, CPU us/token |")
    print("|---|---|---|---|---|---|---|")
    for name, path, prompt, new, ctx in (("tiny test model", ROOT / "tests" / "data" / "tiny_llama.gguf", 8, 48, 64),
                                         ("SmolLM2-135M Q4_1", ROOT / "models" / "SmolLM2-135M-Instruct" /
                                          "SmolLM2-135M-Instruct.Q4_1.gguf", 16, 64, 256)):
        llm = rlx.LLM(str(path), device="cpu", threads=threads, ctx_size=ctx, max_sequences=1)
        ids = engine_ids(1, prompt, llm.vocab_size)
        llm.generate(ids, max_tokens=4, ignore_eos=True)  # compiled
        t = per_token_python(llm, ids, new, reps)
        cpp = per_token_cpp(engine_bench, str(path), threads, prompt, new, ctx, reps) if engine_bench else float("nan")
        print(f"| {name} | {cpp * 1e6:.1f} | {t['whole', 'wall'] * 1e6:.1f} | {t['streamed', 'wall'] * 1e6:.1f} | "
              f"{t['whole', 'cpu'] * 1e6:.1f} | {t['streamed', 'cpu'] * 1e6:.1f} | "
              f"{(t['streamed', 'cpu'] - t['whole', 'cpu']) * 1e6:+.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=str(ROOT / "build" / "rlx"))
    ap.add_argument("--engine-bench", default=str(ROOT / "build" / "rlx_engine_bench"))
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads, for the CLI, rlx_engine_bench and Python alike (0: every physical core)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", choices=["encode", "generate"], help="one of the two parts")
    a = ap.parse_args()
    if a.only != "generate":
        encode_bench(a.cli, a.threads, a.reps)
    if a.only != "encode":
        generation_bench(a.engine_bench if os.path.exists(a.engine_bench) else None, a.threads, a.reps)


if __name__ == "__main__":
    main()
