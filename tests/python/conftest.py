"""Paths the Python tests share: the checkout (its models and test data) and
the `rlx` command line whose output the package must equal. scripts/test-python
sets RLX_SOURCE_DIR and RLX_CLI; run elsewhere, they default to this checkout."""

import os
import pathlib
import subprocess
import threading

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("RLX_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CLI = pathlib.Path(os.environ.get("RLX_CLI", SOURCE_DIR / "build" / "rlx"))
MINILM = SOURCE_DIR / "models" / "all-MiniLM-L6-v2"
SMOLLM2 = SOURCE_DIR / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_LLAMA = SOURCE_DIR / "tests" / "data" / "tiny_llama.gguf"
DATA = SOURCE_DIR / "tests" / "data"


def need(path):
    """The models come from scripts/setup: without them the tests fail, never skip."""
    assert path.exists(), f"{path} is missing: run scripts/setup"
    return str(path)


def run_cli(*args, stdin=None):
    """`rlx ARGS...` on one thread; its stdout, failing with stderr on a non-zero exit."""
    assert CLI.exists(), f"{CLI} is missing: build rlx first (scripts/setup)"
    r = subprocess.run([str(CLI), *args], input=stdin, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="session")
def encoder():
    import rlx

    return rlx.SentenceEncoder(need(MINILM), device="cpu", threads=1)


@pytest.fixture(scope="session")
def smollm2():
    import rlx

    return rlx.LLM(need(SMOLLM2), device="cpu", threads=1, ctx_size=512, max_sequences=2)


@pytest.fixture(scope="session")
def tiny():
    import rlx

    return rlx.LLM(need(TINY_LLAMA), device="cpu", threads=1, max_sequences=3)


def ticks_while(work):
    """How far a busy counter thread counts while work() runs: a call that
    holds the GIL leaves it a few switch intervals' worth."""
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        before = ticks
        work()
        return ticks - before
    finally:
        stop.set()
        t.join()
