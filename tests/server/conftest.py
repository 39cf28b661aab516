# Starts `rlx serve` on 127.0.0.1 on a free port for the tests, waits for
# /health, and stops it with SIGTERM afterwards (asserting a clean exit).
import json
import os
import re
import signal
import subprocess
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RLX = os.environ.get("RLX_BIN", os.path.join(ROOT, "build", "rlx"))
DECODER = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
EMBEDDER = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")


class Server:
    def __init__(self, *args, log_name="serve"):
        self.log_path = os.path.join(os.environ.get("RLX_SERVER_LOGS", "/tmp"), f"rlx-{log_name}-{os.getpid()}.log")
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen([RLX, "serve", "--port", "0", *args], stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rlx serve exited with {self.proc.returncode}:\n{self.text()}")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.1)
        assert self.port, f"rlx serve did not start:\n{self.text()}"
        self.url = f"http://127.0.0.1:{self.port}"
        status, body = get(self.url + "/health")
        assert status == 200 and body == {"status": "ok"}

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=120)
        assert rc == 0, f"rlx serve exited with {rc}:\n{self.text()}"
        assert "rlx serve: stopped" in self.text()


def request(url, body=None, method=None, raw=None, headers=None, timeout=120):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None else "GET"))
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null"), dict(r.headers)
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None, dict(e.headers)


def get(url):
    status, body, _ = request(url)
    return status, body


def post(url, body=None, **kw):
    status, body, _ = request(url, body, **kw)
    return status, body


@pytest.fixture(scope="session")
def server():
    s = Server("--model", DECODER, "--embedding-model", EMBEDDER, "--parallel", "16", "--ctx-size", "512",
               "--max-queue", "4096")
    yield s
    s.stop()


def metric(url, name):
    with urllib.request.urlopen(url + "/metrics") as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)
