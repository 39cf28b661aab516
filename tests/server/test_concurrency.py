# Continuous batching seen from clients: concurrent greedy requests answer
# what each answers alone, and a bounded load (64 clients for 30 s) loses
# and duplicates nothing, with memory flat.
import asyncio
import os
import threading
import time

import openai

MODEL = "SmolLM2-135M-Instruct.Q4_1"
PROMPTS = [f"Write the number {i} in words, then a fact about it:" for i in range(16)]


def test_sixteen_concurrent_requests_equal_each_alone(server):
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    alone = [c.completions.create(model=MODEL, prompt=p, max_tokens=16, temperature=0).choices[0].text
             for p in PROMPTS]
    assert len(set(alone)) > 8  # the prompts lead to different replies
    together = [None] * len(PROMPTS)

    def run(i):
        together[i] = c.completions.create(model=MODEL, prompt=PROMPTS[i], max_tokens=16, temperature=0).choices[0].text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone


async def stream_one(client, prompt, max_tokens):
    pieces = []
    stream = await client.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                             stream=True, extra_body={"ignore_eos": True})
    async for chunk in stream:
        for ch in chunk.choices:
            if ch.text:
                pieces.append(ch.text)
    return "".join(pieces)


def test_bounded_load_loses_nothing(server):
    seconds = float(os.environ.get("RLX_SERVER_LOAD_SECONDS", "30"))
    prompts = [f"Item {i}: the story of a" for i in range(8)]
    sync = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    want = {p: sync.completions.create(model=MODEL, prompt=p, max_tokens=8, temperature=0,
                                       extra_body={"ignore_eos": True}).choices[0].text for p in prompts}
    rss = []

    async def main():
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
        stop_at = time.time() + seconds
        done, wrong = [0], []

        async def worker(k):
            i = k
            while time.time() < stop_at:
                p = prompts[i % len(prompts)]
                got = await stream_one(client, p, 8)
                if got != want[p]:
                    wrong.append((p, got, want[p]))
                done[0] += 1
                i += 1

        async def sample_memory():
            while time.time() < stop_at:
                rss.append(server.rss_kb())
                await asyncio.sleep(1)

        await asyncio.gather(sample_memory(), *(worker(k) for k in range(64)))
        await client.close()
        return done[0], wrong

    finished, wrong = asyncio.run(main())
    assert wrong == []
    assert finished >= 64
    # Memory flat: after the first third of the run, growth stays under 64 MB.
    settled = rss[len(rss) // 3:]
    assert max(settled) - settled[0] < 64 * 1024, rss
