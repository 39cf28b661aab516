#!/usr/bin/env python3
"""Drives an OpenAI-compatible server the way many clients would: at each
concurrency C, 2*C streamed /v1/completions requests (C at a time), each a
prompt of random token ids (different per request, the same for every
server given the same --seed) and --new generated tokens, greedy, with
ignore_eos. Reports aggregate generated tokens/s, request latency and time
to first token percentiles. Python's standard library only (asyncio and raw
HTTP/1.1), so it runs where nothing can be installed.

  python3 bench/serve_bench.py --url http://127.0.0.1:8080 --label rlx --concurrency 1,8,32,64
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from urllib.parse import urlparse


async def read_chunked(reader):
    """Yields the body of a chunked (or close-delimited) response as it arrives."""
    while True:
        line = await reader.readline()
        if not line:
            return
        size = int(line.strip().split(b";")[0] or b"0", 16)
        if size == 0:
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


async def one_request(host, port, body, model):
    payload = json.dumps(body).encode()
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    await writer.drain()
    status = await reader.readline()
    headers = {}
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    if b" 200 " not in status:
        rest = await reader.read()
        raise RuntimeError(f"{status!r} {rest[:300]!r}")
    ttft, tokens, usage, buf = None, 0, None, b""
    chunks = read_chunked(reader) if headers.get("transfer-encoding") == "chunked" else None
    async def body_parts():
        if chunks is not None:
            async for c in chunks:
                yield c
        else:
            while True:
                c = await reader.read(65536)
                if not c:
                    return
                yield c
    async for part in body_parts():
        buf += part
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    continue
                j = json.loads(data)
                if "error" in j:
                    raise RuntimeError(j["error"])
                if j.get("usage"):
                    usage = j["usage"]
                for ch in j.get("choices", []):
                    if ch.get("text"):
                        tokens += 1
                        if ttft is None:
                            ttft = time.perf_counter() - t0
    writer.close()
    total = time.perf_counter() - t0
    generated = usage["completion_tokens"] if usage else body["max_tokens"]
    return total, ttft if ttft is not None else total, generated, tokens


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def level(host, port, c, args, rng, model):
    bodies = []
    for _ in range(2 * c):
        ids = [rng.randrange(3, args.vocab) for _ in range(args.prompt_tokens)]
        bodies.append({"model": model, "prompt": ids, "max_tokens": args.new, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}})
    sem = asyncio.Semaphore(c)
    results = []

    async def run(b):
        async with sem:
            results.append(await one_request(host, port, b, model))

    t0 = time.perf_counter()
    await asyncio.gather(*(run(b) for b in bodies))
    wall = time.perf_counter() - t0
    gen = sum(r[2] for r in results)
    return {"concurrency": c, "requests": len(results), "wall_s": wall, "tokens_per_s": gen / wall,
            "latency_p50_s": pct([r[0] for r in results], 50), "latency_p90_s": pct([r[0] for r in results], 90),
            "ttft_p50_ms": 1000 * pct([r[1] for r in results], 50), "ttft_p90_ms": 1000 * pct([r[1] for r in results], 90),
            "generated": gen}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--label", default="server")
    ap.add_argument("--model", default="")
    ap.add_argument("--concurrency", default="1,8,32,64")
    ap.add_argument("--prompt-tokens", type=int, default=850)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=2, help="requests sent first, not counted")
    ap.add_argument("--json", help="append the rows here, one JSON object per line")
    args = ap.parse_args()
    u = urlparse(args.url)
    rng = random.Random(args.seed)

    async def run_all():
        for _ in range(args.warmup):
            await one_request(u.hostname, u.port, {"model": args.model, "prompt": [5] * 64, "max_tokens": 8,
                                                   "temperature": 0, "stream": True, "ignore_eos": True}, args.model)
        rows = []
        for c in [int(x) for x in args.concurrency.split(",")]:
            rows.append(await level(u.hostname, u.port, c, args, rng, args.model))
            r = rows[-1]
            print(f"{args.label:>14} c={c:<3} {r['tokens_per_s']:8.0f} tok/s  latency p50 {r['latency_p50_s']:6.2f} s "
                  f"p90 {r['latency_p90_s']:6.2f} s  ttft p50 {r['ttft_p50_ms']:7.0f} ms p90 {r['ttft_p90_ms']:7.0f} ms",
                  flush=True)
        return rows

    rows = asyncio.run(run_all())
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps({"label": args.label, **r}) + "\n")


if __name__ == "__main__":
    main()
