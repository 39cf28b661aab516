#!/usr/bin/env python3
"""BERT latency: rlx against PyTorch on the GPU.

For each shape a randomly initialised transformers.BertModel is saved with
save_pretrained; PyTorch runs it eagerly, as a captured CUDA graph (static
inputs) and, with --compile, through torch.compile; rlx times the same
directory with `rlx bench --model DIR --json` (perop, graph, graph pipelined,
graph device).

PyTorch is timed on the GPU with CUDA events around each call (median over
--runs after warmup). rlx's perop, graph and pipelined numbers are wall clock
per run() and include copying the ids in and last_hidden_state out; its
"graph device" row times the recorded forward's kernels alone the way
PyTorch's graph is timed (CUDA events around one launch, inputs already on
the device, nothing copied out). The targets compare that row with
PyTorch's CUDA graph: like with like. TF32 is off on both sides: f32 means
f32.

Prints one markdown table; writes it to $OUT/bench.md when OUT is set.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import transformers

SHAPES = {
    "BERT-base": dict(hidden=768, layers=12, heads=12, ffn=3072),
    "MiniLM-L6": dict(hidden=384, layers=6, heads=12, ffn=1536),
}
# rlx graph device / torch graph at f16 (shape, batch) -> at most
TARGETS = {("BERT-base", 1): 0.5, ("BERT-base", 32): 0.8, ("MiniLM-L6", 1): 0.5, ("MiniLM-L6", 32): 0.8}
TORCH_DTYPE = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def save_model(shape, directory, seed):
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
                                  num_attention_heads=shape["heads"], intermediate_size=shape["ffn"],
                                  vocab_size=30522, max_position_embeddings=512)
    model = transformers.BertModel(cfg).eval()
    model.save_pretrained(directory, safe_serialization=True)
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    c["model_type"], c["architectures"] = "bert", ["BertModel"]
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    return model


def time_cuda(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)  # ms -> us
    return statistics.median(times)


def time_wall(fn, runs, warmup):
    """Eager PyTorch is bound by the host launching kernels: time it by the
    wall clock, from the call to the GPU being done, median of runs."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def torch_times(model, batch, seq, dtype, runs, warmup, use_compile):
    m = model.to(device="cuda", dtype=TORCH_DTYPE[dtype])
    g = torch.Generator(device="cuda").manual_seed(7)
    ids = torch.randint(0, 30522, (batch, seq), device="cuda", generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long, device="cuda")
    types = torch.zeros_like(ids)
    res = {}
    with torch.inference_mode():
        def fwd():
            return m(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

        res["eager"] = time_wall(fwd, runs, max(warmup, 20))

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fwd()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = fwd()
        res["graph"] = time_cuda(graph.replay, runs, warmup)
        del static_out, graph

        if use_compile:
            cm = torch.compile(m, mode="max-autotune")

            def cfwd():
                return cm(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

            res["compile"] = time_cuda(cfwd, runs, warmup + 3)
    return res


def rlx_times(rlx, model_dir, batch, seq, dtype, runs, warmup, trace=None):
    cmd = [rlx, "bench", "--model", model_dir, "--device", "cuda", "--batch", str(batch), "--seq", str(seq),
           "--dtype", dtype, "--runs", str(runs), "--warmup", str(warmup), "--json"]
    if trace:
        cmd += ["--trace-json", trace]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if trace and p.returncode == 0:
        print(p.stderr.rstrip(), flush=True)  # per-kind GPU time of the graph executable
    if p.returncode != 0:
        print(f"rlx bench failed ({' '.join(cmd)}):\n{p.stdout}{p.stderr}", file=sys.stderr, flush=True)
        return {}
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return {r["mode"]: r["median_us"] for r in rows}


def fmt(x):
    return "-" if x is None else f"{x:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rlx", default="build-gpu/rlx")
    ap.add_argument("--shapes", default="BERT-base,MiniLM-L6")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dtypes", default="f32,f16")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--compile", action="store_true", help="also torch.compile (max-autotune; slow)")
    ap.add_argument("--trace", action="store_true", help="print rlx's per-thunk-kind GPU time for each row")
    args = ap.parse_args()
    assert args.runs >= 50, "medians over at least 50 runs"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    work = tempfile.mkdtemp(prefix="rlx_bench_")
    print(f"bench_bert: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name()}, seq {args.seq}", flush=True)

    rows = []
    for si, name in enumerate(args.shapes.split(",")):
        model_dir = os.path.join(work, name)
        model = save_model(SHAPES[name], model_dir, seed=si + 1)
        for dtype in args.dtypes.split(","):
            for batch in [int(b) for b in args.batches.split(",")]:
                t0 = time.time()
                t = torch_times(model, batch, args.seq, dtype, args.runs, args.warmup, args.compile)
                trace = os.path.join(work, f"{name}_b{batch}_{dtype}.trace.json") if args.trace else None
                r = rlx_times(args.rlx, model_dir, batch, args.seq, dtype, args.runs, args.warmup, trace)
                row = dict(shape=name, batch=batch, dtype=dtype, eager=t.get("eager"), tgraph=t.get("graph"),
                           compile=t.get("compile"), perop=r.get("perop"), graph=r.get("graph"),
                           pipelined=r.get("graph pipelined"), device=r.get("graph device"))
                row["ratio"] = row["graph"] / row["tgraph"] if row["graph"] and row["tgraph"] else None
                row["dratio"] = row["device"] / row["tgraph"] if row["device"] and row["tgraph"] else None
                rows.append(row)
                print(f"  {name} b{batch} {dtype}: torch {t}, rlx {r} ({time.time() - t0:.1f} s)", flush=True)
                torch.cuda.empty_cache()

    lines = []
    head = "| shape | batch | dtype | torch eager | torch graph |"
    sep = "|---|---|---|---|---|"
    if args.compile:
        head += " torch.compile |"
        sep += "---|"
    head += (" rlx perop | rlx graph | rlx pipelined | rlx graph device | rlx graph / torch graph |"
             " rlx device / torch graph | target |")
    sep += "---|---|---|---|---|---|---|"
    lines += [f"BERT forward latency, seq {args.seq}, median µs ({torch.cuda.get_device_name()}; "
              f"torch: CUDA events around each call; rlx perop/graph/pipelined: wall clock per run incl. "
              f"host copies; rlx graph device: CUDA events around one launch of the kernels, as torch; "
              f"TF32 off)", "", head, sep]
    missed = 0
    for r in rows:
        target = TARGETS.get((r["shape"], r["batch"])) if r["dtype"] == "f16" else None
        verdict = "-"
        if target is not None:
            ok = r["dratio"] is not None and r["dratio"] <= target
            missed += not ok
            verdict = f"<= {target} {'met' if ok else 'MISSED'}"
        line = f"| {r['shape']} | {r['batch']} | {r['dtype']} | {fmt(r['eager'])} | {fmt(r['tgraph'])} |"
        if args.compile:
            line += f" {fmt(r['compile'])} |"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        dratio = "-" if r["dratio"] is None else f"{r['dratio']:.2f}x"
        line += (f" {fmt(r['perop'])} | {fmt(r['graph'])} | {fmt(r['pipelined'])} | {fmt(r['device'])} | {ratio} |"
                 f" {dratio} | {verdict} |")
        lines.append(line)
    table = "\n".join(lines)
    print()
    print(table)
    print(f"\nbench_bert: {len(rows)} rows, {missed} f16 targets missed")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "bench.md"), "w") as f:
            f.write(table + "\n")
    return 0 if all(r["graph"] is not None and r["device"] is not None for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
