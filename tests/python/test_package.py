"""The installed wheel: where it lives, what it carries, its version, its
stubs and docstrings, and the README's Python examples run as written."""

import pathlib
import re
import subprocess
import sys

import rlx
from conftest import CLI, SOURCE_DIR, run_cli

PACKAGE = pathlib.Path(rlx.__file__).resolve().parent


def test_installed_apart_from_the_sources_and_the_build():
    assert "site-packages" in PACKAGE.parts, PACKAGE
    for tree in ("python", "build-wheel", "build"):
        assert (SOURCE_DIR / tree).resolve() not in PACKAGE.parents, PACKAGE
    assert SOURCE_DIR.resolve() not in pathlib.Path.cwd().resolve().parents
    # The libraries the module loads are the wheel's (or the system's), none from a build tree.
    module = next(PACKAGE.glob("_rlx.*.so"))
    ldd = subprocess.run(["ldd", str(module)], capture_output=True, text=True, check=True).stdout
    assert f"librlx.so => {PACKAGE}/librlx.so" in ldd, ldd
    assert "build-wheel" not in ldd and "not found" not in ldd, ldd
    names = {p.name for p in PACKAGE.iterdir()}
    assert "librlx.so" in names and "py.typed" in names and "_rlx.pyi" in names
    assert any(n.startswith("_rlx.") and n.endswith(".so") for n in names)


def test_libraries_are_found_beside_the_module():
    # A fresh interpreter, no library path: $ORIGIN finds librlx.so.
    code = "import rlx, sys; print(rlx.__version__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                       cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == rlx.__version__
    ours = [p for p in PACKAGE.glob("*.so") if p.name.startswith(("_rlx.", "librlx"))]
    assert len(ours) >= 2
    for lib in ours:
        dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
        assert re.search(r"R(UN)?PATH.*\[\$ORIGIN", dyn), f"{lib.name} has no $ORIGIN run path:\n{dyn}"


def test_version_is_the_projects():
    cmake = (SOURCE_DIR / "CMakeLists.txt").read_text()
    want = re.search(r"project\(rlx VERSION ([0-9.]+)", cmake).group(1)
    assert rlx.__version__ == want
    assert run_cli("--version").strip() == f"rlx {want}"
    from importlib.metadata import version

    assert version("rlx") == want


def test_stubs_and_docstrings():
    stub = (PACKAGE / "_rlx.pyi").read_text()
    compile(stub, "_rlx.pyi", "exec")  # valid Python
    for name in ("class SentenceEncoder", "def encode(self, sentences: str", "class LLM", "def generate(self, prompt",
                 "def generate_batch", "def chat(self, messages", "class GenerationStream", "class Error(RuntimeError)",
                 "class CrossEncoder", "def predict(self, pairs", "def rank(self, query: str"):
        assert name in stub, name
    for f in (rlx.SentenceEncoder.encode, rlx.SentenceEncoder.similarity, rlx.LLM.generate, rlx.LLM.chat,
              rlx.LLM.generate_batch, rlx.Tokenizer.encode, rlx.CrossEncoder.predict, rlx.CrossEncoder.rank):
        assert f.__doc__ and len(f.__doc__) > 40, f
    assert issubclass(rlx.Error, RuntimeError)


def python_blocks(readme):
    section = readme.split("## Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_examples_run_as_written():
    blocks = python_blocks((SOURCE_DIR / "README.md").read_text())
    assert len(blocks) >= 3
    for code in blocks:
        # From the checkout's root, where scripts/setup put the models.
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=SOURCE_DIR, timeout=300)
        assert r.returncode == 0, f"{code}\n{r.stderr}"
        assert r.stdout.strip(), code
