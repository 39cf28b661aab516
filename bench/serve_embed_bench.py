#!/usr/bin/env python3
"""/v1/embeddings of `rlx serve` under 64 concurrent clients (16 sentences a
request) against sentence-transformers' encode (fp16, batch 128) on the same
model in the same run. The model is all-MiniLM-L6-v2's configuration and
tokenizer with random weights (transformers writes them), so it runs
without a network; sentences are 8-40 random vocabulary words.

  python3 bench/serve_embed_bench.py --rlx build-gpu/rlx --config-dir DIR [--sentences 20000]
"""
import argparse
import asyncio
import base64
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def make_model(config_dir, out):
    import torch
    from transformers import BertConfig, BertModel
    shutil.copytree(config_dir, out, dirs_exist_ok=True)
    torch.manual_seed(0)
    model = BertModel(BertConfig.from_pretrained(config_dir), add_pooling_layer=False)
    model.save_pretrained(out, safe_serialization=True)
    return out


def sentences(config_dir, n, seed=0):
    words = [w.strip() for w in open(os.path.join(config_dir, "vocab.txt")) if w.strip().isalpha()]
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 40))) for _ in range(n)]


async def post(host, port, body):
    payload = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                 b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        raise RuntimeError(raw[:300])
    return json.loads(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rlx", required=True)
    ap.add_argument("--config-dir", required=True, help="all-MiniLM-L6-v2 without its weights")
    ap.add_argument("--sentences", type=int, default=20000)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--per-request", type=int, default=16)
    ap.add_argument("--port", type=int, default=18085)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    model = make_model(a.config_dir, os.path.join(tmp, "minilm-random"))
    texts = sentences(a.config_dir, a.sentences)

    import torch
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(model, device="cuda")
    st.half()
    st.encode(texts[:512], batch_size=128)  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ref = st.encode(texts, batch_size=128, convert_to_numpy=True)
    torch.cuda.synchronize()
    st_s = time.perf_counter() - t0
    print(f"sentence-transformers fp16 batch 128: {len(texts) / st_s:8.0f} sentences/s ({st_s:.2f} s)", flush=True)
    del st
    torch.cuda.empty_cache()

    log = open(os.path.join(tmp, "serve.log"), "w")
    proc = subprocess.Popen([a.rlx, "serve", "--embedding-model", model, "--device", "cuda", "--dtype", "f16",
                             "--port", str(a.port), "--max-batch-tokens", "16384"], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                asyncio.run(post("127.0.0.1", a.port, {"input": ["warm up"]}))
                break
            except (OSError, RuntimeError):
                time.sleep(0.2)
        chunks = [texts[i:i + a.per_request] for i in range(0, len(texts), a.per_request)]

        async def run(fmt):
            out = [None] * len(chunks)
            sem = asyncio.Semaphore(a.clients)

            async def one(i):
                async with sem:
                    r = await post("127.0.0.1", a.port, {"input": chunks[i], "encoding_format": fmt})
                    out[i] = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") if fmt == "base64"
                              else np.asarray(d["embedding"], dtype=np.float32) for d in r["data"]]

            await asyncio.gather(*(one(i) for i in range(min(len(chunks), a.clients * 2))))  # warm-up: every bucket
            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(len(chunks))))
            return out, time.perf_counter() - t0

        # base64 is what the official openai client asks for; float is JSON numbers.
        for fmt in ("base64", "float"):
            out, rlx_s = asyncio.run(run(fmt))
            got = np.stack([v for r in out for v in r])
            cos = (got * ref).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))
            print(f"rlx serve /v1/embeddings ({fmt}), {a.clients} clients x {a.per_request}: "
                  f"{len(texts) / rlx_s:8.0f} sentences/s ({rlx_s:.2f} s); ratio {st_s / rlx_s:.2f}x; "
                  f"cosine to sentence-transformers min {cos.min():.5f}", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
