# One listener over several engines: `--devices cpu,cpu` serves the decoder
# as two replicas, each request on the less loaded one; `--tensor-parallel 3`
# splits one replica over three host ranks (SmolLM2's 9 heads, 3 KV heads).
# Both answer what the one-engine server answers, with the real openai client.
import threading

import openai

from conftest import DECODER, EMBEDDER, Server, get, metric, post

MODEL = "SmolLM2-135M-Instruct.Q4_1"
PROMPTS = [f"Write the number {i} in words, then a fact about it:" for i in range(8)]


def replies(url, prompts):
    c = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)
    out = [None] * len(prompts)

    def run(i):
        out[i] = c.completions.create(model=MODEL, prompt=prompts[i], max_tokens=12, temperature=0).choices[0].text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def replica_requests(url, name="rlx_replica_requests_total"):
    import urllib.request

    with urllib.request.urlopen(url + "/metrics") as r:
        text = r.read().decode()
    counts = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            counts[labels.split('replica="')[1].split('"')[0]] = float(value)
    return counts


def test_two_cpu_replicas_share_the_requests_and_answer_alike(server):
    want = replies(server.url, PROMPTS)
    assert len(set(want)) > 4
    texts = [f"sentence number {i} about the sea" for i in range(12)]
    status, want_rows = post(server.url + "/embed", {"inputs": texts})
    assert status == 200
    s = Server("--model", DECODER, "--embedding-model", EMBEDDER, "--devices", "cpu,cpu", "--parallel", "4",
               "--ctx-size", "256", log_name="replicas")
    try:
        status, info = get(s.url + "/info")
        assert status == 200 and info["generation"]["replicas"] == ["cpu", "cpu"]
        assert info["embedding_replicas"] == ["cpu", "cpu"]
        assert replies(s.url, PROMPTS) == want
        counts = replica_requests(s.url)
        assert set(counts) == {"0", "1"}
        assert counts["0"] + counts["1"] == len(PROMPTS)
        assert counts["0"] >= 2 and counts["1"] >= 2, counts  # both replicas took requests
        assert metric(s.url, "rlx_kv_slots") == 8  # --parallel per replica
        # Embedding requests, concurrent, over both embedder replicas: the one-engine rows.
        got = [None] * len(texts)

        def embed(i):
            got[i] = post(s.url + "/embed", {"inputs": [texts[i]]})

        threads = [threading.Thread(target=embed, args=(i,)) for i in range(len(texts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, (status, rows) in enumerate(got):
            assert status == 200
            assert max(abs(a - b) for a, b in zip(rows[0], want_rows[i])) < 1e-5, i
        counts = replica_requests(s.url, "rlx_embedding_replica_requests_total")
        assert set(counts) == {"0", "1"} and counts["0"] + counts["1"] == len(texts), counts
        assert counts["0"] >= 1 and counts["1"] >= 1, counts
    finally:
        s.stop()


def test_a_replica_split_over_three_host_ranks_answers_alike(server):
    want = replies(server.url, PROMPTS[:3])
    s = Server("--model", DECODER, "--devices", "cpu,cpu,cpu", "--tensor-parallel", "3", "--parallel", "4",
               "--ctx-size", "256", log_name="tp3")
    try:
        status, info = get(s.url + "/info")
        assert status == 200 and info["generation"]["replicas"] == ["cpu"]
        assert replies(s.url, PROMPTS[:3]) == want
    finally:
        s.stop()


def test_devices_that_cannot_split_the_model_are_refused_by_name():
    import subprocess

    from conftest import RLX

    p = subprocess.run([RLX, "serve", "--model", DECODER, "--devices", "cpu,cpu", "--tensor-parallel", "2",
                        "--port", "0"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "num_attention_heads 9 is not a multiple of 2" in p.stderr and DECODER in p.stderr, p.stderr
    p = subprocess.run([RLX, "serve", "--model", DECODER, "--devices", "cpu,1", "--port", "0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "mixes cpu and GPUs" in p.stderr, p.stderr
