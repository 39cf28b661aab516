#!/usr/bin/env python3
"""rlx's CPU backend against ONNX Runtime, side by side on the same cores.

Builds an ONNX graph of a BERT encoder from the same safetensors rlx loads
(or, for the BERT-base-shaped demo encoder, from random weights of that shape),
checks that ONNX Runtime's last_hidden_state matches `rlx forward`, then times,
alternating in one process, ONNX Runtime (full graph optimisation, N intra-op
threads) and `rlx bench --device cpu`. Prints per row the median of each
side's per-block medians, their spread (min..max over blocks) and rlx / ORT.

Bench-only dependencies (onnxruntime, onnx, numpy, safetensors) are installed
into .deps/bench-py on first use; nothing here is needed to build rlx.

  python3 bench/bench_cpu_ort.py [--rlx build/rlx] [--model models/all-MiniLM-L6-v2]
                                 [--threads 2] [--repeats 3] [--rows minilm-b1s128,...] [--cpu-time]
                                 [--rlx-dtype bf16] [--ort-int8] [--rlx-int8]

--rlx-dtype runs rlx in bf16 (or f16) against ONNX Runtime's f32 and reports
the accuracy of rlx's hidden states against ORT's f32 ones (worst per-token
cosine and the mean-pooled sentence vectors' cosine). --ort-int8 adds ONNX
Runtime's own dynamic int8 quantization (quantize_dynamic, per-channel
weights) as a column, with its accuracy the same way. --rlx-int8 adds rlx
with int8 products (`--quantize int8`, in --rlx-dtype) as a column, its
accuracy the same way.
"""
import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPS = os.path.join(ROOT, ".deps", "bench-py")
REQUIREMENTS = ["onnxruntime", "onnx", "numpy", "safetensors"]


def import_deps():
    sys.path.insert(0, DEPS)
    try:
        import numpy, onnx, onnxruntime, safetensors  # noqa: F401
    except ImportError:
        print(f"bench: installing {' '.join(REQUIREMENTS)} into {DEPS}", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--target", DEPS] + REQUIREMENTS)
        importlib.invalidate_caches()  # the folder was empty when the path was first searched
    import numpy, onnx, onnxruntime  # noqa: F401,F811
    return numpy, onnx, onnxruntime


np, onnx, ort = import_deps()
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


# ---------------------------------------------------------------- ONNX graph
def bert_onnx(w, cfg, seq):
    """An ONNX BertModel (post-norm, erf GELU) with weights w by Hugging Face
    name (no 'bert.' prefix); inputs are int64 [batch, seq]."""
    H, heads, layers = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    D, eps = H // heads, cfg.get("layer_norm_eps", 1e-12)
    nodes, inits = [], []
    counter = [0]

    def name(prefix):
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def init(n, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), n))
        return n

    def node(op, ins, **attrs):
        out = name(op.lower())
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def const(v, dtype=np.float32):
        return init(name("c"), np.array(v, dtype=dtype))

    def linear(x, prefix):  # torch exports x @ W^T + b as MatMul with a transposed initializer
        y = node("MatMul", [x, init(prefix + ".weight_t", w[prefix + ".weight"].T)])
        return node("Add", [y, init(prefix + ".bias", w[prefix + ".bias"])])

    def layer_norm(x, prefix):
        return node("LayerNormalization", [x, init(prefix + ".weight", w[prefix + ".weight"]),
                                           init(prefix + ".bias", w[prefix + ".bias"])], axis=-1, epsilon=eps)

    emb = node("Add", [node("Gather", [init("word", w["embeddings.word_embeddings.weight"]), "input_ids"]),
                       node("Gather", [init("pos", w["embeddings.position_embeddings.weight"]),
                                       const(np.arange(seq), np.int64)])])
    if "embeddings.token_type_embeddings.weight" in w:
        emb = node("Add", [emb, node("Gather", [init("type", w["embeddings.token_type_embeddings.weight"]),
                                                "token_type_ids"])])
    x = layer_norm(emb, "embeddings.LayerNorm")
    # (1 - mask) * -10000 as [batch, 1, 1, seq], as Hugging Face's BERT export has it.
    m = node("Cast", [node("Unsqueeze", ["attention_mask", const([1, 2], np.int64)])], to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [const(1.0), m]), const(-10000.0)])
    heads_shape = const([0, 0, heads, D], np.int64)
    merged_shape = const([0, 0, H], np.int64)
    for l in range(layers):
        p = f"encoder.layer.{l}."

        def split(t):
            return node("Reshape", [t, heads_shape])

        q = node("Transpose", [split(linear(x, p + "attention.self.query"))], perm=[0, 2, 1, 3])
        k = node("Transpose", [split(linear(x, p + "attention.self.key"))], perm=[0, 2, 3, 1])
        v = node("Transpose", [split(linear(x, p + "attention.self.value"))], perm=[0, 2, 1, 3])
        s = node("Add", [node("Div", [node("MatMul", [q, k]), const(float(np.sqrt(D)))]), bias])
        ctx = node("MatMul", [node("Softmax", [s], axis=-1), v])
        ctx = node("Reshape", [node("Transpose", [ctx], perm=[0, 2, 1, 3]), merged_shape])
        a = linear(ctx, p + "attention.output.dense")
        x = layer_norm(node("Add", [a, x]), p + "attention.output.LayerNorm")
        f = linear(x, p + "intermediate.dense")
        f = node("Mul", [node("Mul", [f, node("Add", [node("Erf", [node("Div", [f, const(1.4142135623730951)])]),
                                                        const(1.0)])]), const(0.5)])
        o = linear(f, p + "output.dense")
        x = layer_norm(node("Add", [o, x]), p + "output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", seq])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", seq, H])
    g = helper.make_graph(nodes, "bert", ins, [out], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def session(model_proto, threads, workdir, tag, int8=False):
    path = os.path.join(workdir, tag + ".onnx")
    onnx.save(model_proto, path)
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic
        qpath = os.path.join(workdir, tag + ".int8.onnx")
        quantize_dynamic(path, qpath, weight_type=QuantType.QInt8, per_channel=True)
        path = qpath
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_inputs(sess, vocab, batch, seq, seed=7):
    rng = np.random.default_rng(seed)
    feed = {"input_ids": rng.integers(0, vocab, (batch, seq), dtype=np.int64),
            "attention_mask": np.ones((batch, seq), np.int64),
            "token_type_ids": np.zeros((batch, seq), np.int64)}
    names = {i.name for i in sess.get_inputs()}
    return {k: v for k, v in feed.items() if k in names}


# ---------------------------------------------------------------- timing
def time_ort(sess, feed, runs, warmup):
    for _ in range(warmup):
        sess.run(None, feed)
    us = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feed)
        us.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(us)


def time_rlx(args, row, runs, warmup, extra=()):
    cmd = [args.rlx, "bench", "--device", "cpu", "--batch", str(row["batch"]), "--seq", str(row["seq"]),
           "--runs", str(runs), "--warmup", str(warmup), "--json", "--dtype", args.rlx_dtype, *extra]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if row["model"]:
        cmd += ["--model", row["model"]]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_us"]


def ort_cpu_ms(sess, feed, runs, warmup):
    """Median thread CPU time of one ORT run: with one intra-op thread ORT runs
    on this thread, and CPU time does not count the time other processes held
    the core."""
    for _ in range(warmup):
        sess.run(None, feed)
    t = []
    for _ in range(runs):
        t0 = time.thread_time()
        sess.run(None, feed)
        t.append((time.thread_time() - t0) * 1e3)
    return statistics.median(t)


def rlx_cpu_ms(args, row, runs, extra=()):
    """Median process CPU time of one rlx run on one thread, as `rlx bench`
    measures it around each run (median_cpu_us)."""
    cmd = [args.rlx, "bench", "--device", "cpu", "--batch", str(row["batch"]), "--seq", str(row["seq"]),
           "--runs", str(runs), "--warmup", "2", "--threads", "1", "--json", "--dtype", args.rlx_dtype, *extra]
    if row["model"]:
        cmd += ["--model", row["model"]]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_cpu_us"] / 1e6 * 1e3


def cosines(got, ref, batch, seq):
    """Worst per-token cosine and worst mean-pooled (all tokens) cosine."""
    g, r = got.reshape(batch, seq, -1).astype(np.float64), ref.reshape(batch, seq, -1).astype(np.float64)
    cos = lambda a, b: np.sum(a * b, -1) / np.sqrt(np.sum(a * a, -1) * np.sum(b * b, -1))  # noqa: E731
    return float(cos(g, r).min()), float(cos(g.mean(1), r.mean(1)).min())


def check_parity(args, sess, model, vocab, workdir, int8_sess=None):
    """ORT's last_hidden_state against `rlx forward` on random ids (in
    --rlx-dtype), and ORT int8's against ORT f32's."""
    batch, seq = 2, 16
    feed = ort_inputs(sess, vocab, batch, seq, seed=3)
    ids = os.path.join(workdir, "ids.json")
    with open(ids, "w") as f:
        json.dump({k: feed[k].tolist() for k in feed}, f)
    out = os.path.join(workdir, "rlx.f32")
    subprocess.run([args.rlx, "forward", "--model", model, "--ids", ids, "--out", out, "--device", "cpu",
                    "--dtype", args.rlx_dtype], check=True, capture_output=True)
    r = np.fromfile(out, np.float32)
    o = sess.run(None, feed)[0].reshape(-1)
    err = float(np.max(np.abs(r - o)) / np.max(np.abs(o)))
    tok, pooled = cosines(r, o, batch, seq)
    print(f"parity: rlx forward ({args.rlx_dtype}) vs ONNX Runtime f32, {model}, batch {batch} seq {seq}: "
          f"max rel error {err:.2e}, worst token cosine {tok:.6f}, worst mean-pooled cosine {pooled:.6f}")
    if args.rlx_int8:
        subprocess.run([args.rlx, "forward", "--model", model, "--ids", ids, "--out", out, "--device", "cpu",
                        "--dtype", args.rlx_dtype, "--quantize", "int8"], check=True, capture_output=True)
        r8 = np.fromfile(out, np.float32)
        tok8, pooled8 = cosines(r8, o, batch, seq)
        print(f"parity: rlx forward ({args.rlx_dtype}, int8 products) vs ONNX Runtime f32: worst token cosine "
              f"{tok8:.6f}, worst mean-pooled cosine {pooled8:.6f}")
        if not pooled8 > 0.99:
            sys.exit(f"bench: rlx int8 is far from ONNX Runtime f32 on {model} (pooled cosine {pooled8})")
    if int8_sess is not None:
        q = int8_sess.run(None, feed)[0].reshape(-1)
        qtok, qpooled = cosines(q, o, batch, seq)
        print(f"parity: ONNX Runtime int8 vs f32: worst token cosine {qtok:.6f}, worst mean-pooled cosine "
              f"{qpooled:.6f}")
    if args.rlx_dtype == "f32" and not err < 1e-4:
        sys.exit(f"bench: rlx and ONNX Runtime disagree on {model} (max rel error {err:.2e})")
    if args.rlx_dtype != "f32" and not pooled > 0.99:
        sys.exit(f"bench: rlx {args.rlx_dtype} is far from ONNX Runtime f32 on {model} (pooled cosine {pooled})")


def load_model(path):
    from safetensors.numpy import load_file
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    w = {k.removeprefix("bert."): v for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
    return cfg, w


def random_bert_base():
    cfg = {"hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12, "intermediate_size": 3072,
           "vocab_size": 30522, "max_position_embeddings": 512, "layer_norm_eps": 1e-12}
    rng = np.random.default_rng(1)
    H, F = 768, 3072
    u = lambda *s: rng.uniform(-0.05, 0.05, s).astype(np.float32)  # noqa: E731
    w = {"embeddings.word_embeddings.weight": u(30522, H), "embeddings.position_embeddings.weight": u(512, H),
         "embeddings.LayerNorm.weight": 1 + u(H), "embeddings.LayerNorm.bias": u(H)}
    for l in range(12):
        p = f"encoder.layer.{l}."
        for n, (o, i) in {"attention.self.query": (H, H), "attention.self.key": (H, H),
                          "attention.self.value": (H, H), "attention.output.dense": (H, H),
                          "intermediate.dense": (F, H), "output.dense": (H, F)}.items():
            w[p + n + ".weight"], w[p + n + ".bias"] = u(o, i), u(o)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + n + ".weight"], w[p + n + ".bias"] = 1 + u(H), u(H)
    return cfg, w


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "rlx"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--threads", type=int, default=2, help="ORT intra-op threads and rlx --threads")
    ap.add_argument("--repeats", type=int, default=3, help="alternating blocks per side")
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--rlx-dtype", default="f32", choices=["f32", "bf16", "f16"], help="rlx's --dtype")
    ap.add_argument("--ort-int8", action="store_true", help="also time ONNX Runtime's dynamic int8 quantization")
    ap.add_argument("--rlx-int8", action="store_true", help="also time rlx with int8 products (--quantize int8)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="one thread each, CPU time per run instead of wall clock (for a loaded machine)")
    args = ap.parse_args()

    name = os.path.basename(os.path.normpath(args.model))
    rows = [dict(name="minilm-b1s128", model=args.model, batch=1, seq=128, runs=20),
            dict(name="minilm-b8s128", model=args.model, batch=8, seq=128, runs=6),
            dict(name="minilm-b32s128", model=args.model, batch=32, seq=128, runs=3),
            dict(name="minilm-b1s32", model=args.model, batch=1, seq=32, runs=40),
            dict(name="bertbase-b1s128", model="", batch=1, seq=128, runs=5)]
    if args.rows:
        keep = args.rows.split(",")
        rows = [r for r in rows if r["name"] in keep]

    if args.cpu_time:
        args.threads = 1
    workdir = tempfile.mkdtemp(prefix="rlx-bench-")
    cfg, w = load_model(args.model)
    sessions, int8_sessions = {}, {}
    results = []
    for row in rows:
        if row["model"]:
            key = ("model", row["seq"])
            if key not in sessions:
                proto = bert_onnx(w, cfg, row["seq"])
                sessions[key] = session(proto, args.threads, workdir, f"model{row['seq']}")
                if args.ort_int8:
                    int8_sessions[key] = session(proto, args.threads, workdir, f"model{row['seq']}", int8=True)
                if len(sessions) == 1:
                    parity_proto = bert_onnx(w, cfg, 16)
                    parity_sess = session(parity_proto, args.threads, workdir, "parity")
                    parity_int8 = session(parity_proto, args.threads, workdir, "parity", int8=True) \
                        if args.ort_int8 else None
                    check_parity(args, parity_sess, args.model, cfg["vocab_size"], workdir, parity_int8)
            sess, vocab = sessions[key], cfg["vocab_size"]
            sess8 = int8_sessions.get(key)
        else:
            bcfg, bw = random_bert_base()
            proto = bert_onnx(bw, bcfg, row["seq"])
            sess, vocab = session(proto, args.threads, workdir, "bertbase"), 30522
            sess8 = session(proto, args.threads, workdir, "bertbase", int8=True) if args.ort_int8 else None
        feed = ort_inputs(sess, vocab, row["batch"], row["seq"])
        o, r, q, r8 = [], [], [], []
        int8_flag = ["--quantize", "int8"]
        for _ in range(args.repeats):  # alternate so every side sees the same machine
            if args.cpu_time:
                o.append(ort_cpu_ms(sess, feed, row["runs"], warmup=2) * 1e3)
                r.append(rlx_cpu_ms(args, row, row["runs"]) * 1e3)
                if sess8 is not None:
                    q.append(ort_cpu_ms(sess8, feed, row["runs"], warmup=2) * 1e3)
                if args.rlx_int8:
                    r8.append(rlx_cpu_ms(args, row, row["runs"], int8_flag) * 1e3)
                continue
            o.append(time_ort(sess, feed, row["runs"], warmup=2))
            r.append(time_rlx(args, row, row["runs"], warmup=2))
            if sess8 is not None:
                q.append(time_ort(sess8, feed, row["runs"], warmup=2))
            if args.rlx_int8:
                r8.append(time_rlx(args, row, row["runs"], 2, int8_flag))
        res = dict(row=row["name"], batch=row["batch"], seq=row["seq"], ort_ms=statistics.median(o) / 1e3,
                   rlx_ms=statistics.median(r) / 1e3, ort_spread=(min(o) / 1e3, max(o) / 1e3),
                   rlx_spread=(min(r) / 1e3, max(r) / 1e3))
        res["ratio"] = res["rlx_ms"] / res["ort_ms"]
        if q:
            res["int8_ms"], res["int8_spread"] = statistics.median(q) / 1e3, (min(q) / 1e3, max(q) / 1e3)
        if r8:
            res["rlx8_ms"], res["rlx8_spread"] = statistics.median(r8) / 1e3, (min(r8) / 1e3, max(r8) / 1e3)
        results.append(res)
        rlx8 = f"   rlx int8 {res['rlx8_ms']:8.2f} ms ({res['rlx8_ms'] / res['ort_ms']:.2f}x of ORT f32)" if r8 else ""
        int8 = rlx8 + f"   ORT int8 {res['int8_ms']:8.2f} ms ({res['int8_ms'] / res['ort_ms']:.2f}x of f32)" if q else rlx8
        print(f"{res['row']:<18} ORT {res['ort_ms']:8.2f} ms [{res['ort_spread'][0]:.2f}..{res['ort_spread'][1]:.2f}]"
              f"   rlx {res['rlx_ms']:8.2f} ms [{res['rlx_spread'][0]:.2f}..{res['rlx_spread'][1]:.2f}]"
              f"   rlx/ORT {res['ratio']:.2f}x{int8}", flush=True)

    what_time = "CPU time per run, 1 thread" if args.cpu_time else f"{args.threads} threads"
    int8_head = (f" rlx {args.rlx_dtype} int8 (/ ORT f32) |" if args.rlx_int8 else "") + \
        (" ONNX Runtime int8 (/ f32) |" if args.ort_int8 else "")
    lines = [f"| workload ({what_time}) | ONNX Runtime {ort.__version__} f32 | rlx {args.rlx_dtype} | rlx / ORT f32 |"
             + int8_head, "|---|---|---|---|" + ("---|" if args.rlx_int8 else "") + ("---|" if args.ort_int8 else "")]
    for res in results:
        what = f"{name}, batch {res['batch']}, seq {res['seq']}" if res["row"].startswith("minilm") \
            else f"BERT-base shape, batch {res['batch']}, seq {res['seq']}"
        int8 = (f" {res['rlx8_ms']:.1f} ms ({res['rlx8_spread'][0]:.1f}–{res['rlx8_spread'][1]:.1f}; "
                f"{res['rlx8_ms'] / res['ort_ms']:.2f}×) |" if "rlx8_ms" in res else "") + \
            (f" {res['int8_ms']:.1f} ms ({res['int8_ms'] / res['ort_ms']:.2f}×) |" if "int8_ms" in res else "")
        lines.append(f"| {what} | {res['ort_ms']:.1f} ms ({res['ort_spread'][0]:.1f}–{res['ort_spread'][1]:.1f}) "
                     f"| {res['rlx_ms']:.1f} ms ({res['rlx_spread'][0]:.1f}–{res['rlx_spread'][1]:.1f}) "
                     f"| {res['ratio']:.2f}× |" + int8)
    print("\n".join(lines))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
