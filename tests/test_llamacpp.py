"""A real llama.cpp loads the GGUF drafters `--to gguf` writes (opt-in tier: `pytest -m llamacpp`).

llama-cpp-python 0.3.36 vendors llama.cpp 0c1e57098, whose EAGLE-3 code is the final one (byte-identical to
b11434 in src/models/eagle3.cpp). Its sdist is compiled once, library only, CPU only (CMAKE_ARGS below), and
the wheel is cached in $EAGLE3_LLAMACPP_CACHE, else ~/.cache/eagle3-convert/llamacpp-<hash of the pins>/wheels,
beside a venv it is installed into; later runs (and CI, which caches that directory) reuse both. The compile
runs only when asked for (`pytest -m llamacpp`, or EAGLE3_LLAMACPP_BUILD=1): a plain `pytest` skips the tier,
saying so, until the wheel is cached. The compile
took 731 s (12 min) on a shared 2-core machine; the 19 MB wheel is portable (GGML_NATIVE=OFF). When the
package index cannot be reached, the tier is skipped with pip's error as the reason; a failed compile is a
failure.

tests/llamacpp/probe.py runs under that venv, loads a tiny llama TARGET GGUF (written here with the `gguf`
package's writer) and our DRAFT GGUF with llama_model_load_from_file, and reports
llama_model_target_layer_ids (LLAMA_API in src/llama-ext.h, called through ctypes; that header has no
extern "C", so in this build the symbol carries its C++ name); every assertion is here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builders import DrafterSpec, build_drafter
from conftest import DATA
from gguf_target import write_target_gguf

pytestmark = pytest.mark.llamacpp

PACKAGE = "llama-cpp-python==0.3.36"
# Library only (no tools, tests, server, mtmd), no CUDA, no -march=native: a wheel that runs on any x86-64 CI box.
CMAKE_ARGS = ("-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF "
              "-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF")
# What `import llama_cpp` needs (its declared dependencies), pinned.
DEPS = ("numpy==2.4.6", "typing-extensions==4.16.0", "diskcache==5.6.3", "jinja2==3.1.6")
BUILD_TIMEOUT_S = 60 * 60  # the compile; CI caches the wheel, so this is paid once
PROBE = Path(__file__).resolve().parent / "llamacpp" / "probe.py"
READY = ".eagle3-llamacpp-ready"


def pins_text() -> str:
    return (f"python {platform.python_version()} at {sys.base_prefix} on {platform.machine()}\n{PACKAGE}\n"
            f"CMAKE_ARGS={CMAKE_ARGS}\n{' '.join(DEPS)}\n")


def cache_location() -> Path:
    if os.environ.get("EAGLE3_LLAMACPP_CACHE"):
        return Path(os.environ["EAGLE3_LLAMACPP_CACHE"]).expanduser().absolute()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "eagle3-convert" / f"llamacpp-{hashlib.sha256(pins_text().encode()).hexdigest()[:12]}"


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", **extra)
    return env


def pip_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")][-3:]
    return " / ".join(errors) if errors else (lines[-1] if lines else "(no output)")


def run(argv: list[str], timeout: float, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=False, capture_output=True, text=True, env=subprocess_env(**env),
                          timeout=timeout)


def build_allowed(config: pytest.Config) -> bool:
    """The compile runs when asked for: `-m llamacpp` selected, or EAGLE3_LLAMACPP_BUILD=1. A plain `pytest`
    (CI's) runs the tier only once the wheel is cached."""
    markexpr = config.getoption("markexpr", default="") or ""
    return os.environ.get("EAGLE3_LLAMACPP_BUILD") == "1" or ("llamacpp" in markexpr and "not llamacpp" not in
                                                                markexpr)


def built_wheel(root: Path, may_build: bool) -> Path:
    """The cached wheel, or the sdist from the index compiled into one (skip only if the index is unreachable)."""
    wheels = root / "wheels"
    found = sorted(wheels.glob("llama_cpp_python-0.3.36-*.whl"))
    if found:
        return found[-1]
    if not may_build:
        pytest.skip(f"llama.cpp tier: no cached {PACKAGE} wheel in {wheels}; build it once (about 12 min on 2 "
                    "cores) with `python -m pytest -m llamacpp` or EAGLE3_LLAMACPP_BUILD=1")
    sdist = root / "sdist"
    got = run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--timeout", "60",
               "--retries", "2", PACKAGE, "-d", str(sdist)], 900)
    if got.returncode != 0:
        pytest.skip(f"llama.cpp tier not built: `pip download {PACKAGE}` failed (package index unreachable?): "
                    f"{pip_error(got.stderr or got.stdout)}")
    start = time.monotonic()
    tarball = next(sdist.glob("llama_cpp_python-0.3.36*"))
    try:
        built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", str(tarball), "-w", str(wheels)],
                    BUILD_TIMEOUT_S, CMAKE_ARGS=CMAKE_ARGS, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    except subprocess.TimeoutExpired:
        pytest.fail(f"compiling {PACKAGE} did not finish within {BUILD_TIMEOUT_S} s")
    if built.returncode != 0:
        if "No matching distribution" in built.stdout + built.stderr or "connection" in built.stderr.lower():
            pytest.skip(f"llama.cpp tier not built: its build requirements could not be fetched: "
                        f"{pip_error(built.stderr or built.stdout)}")
        pytest.fail(f"compiling {PACKAGE} failed:\n{(built.stderr or built.stdout)[-4000:]}")
    (wheels / "BUILD-SECONDS").write_text(f"{time.monotonic() - start:.0f}\n")
    return next(wheels.glob("llama_cpp_python-0.3.36-*.whl"))


def ensure_venv(root: Path, may_build: bool) -> Path:
    pins = pins_text()
    root.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        venv = root / "venv"
        python = venv / "bin" / "python"
        if (venv / READY).is_file() and (venv / READY).read_text() == pins and python.exists():
            return python
        wheel = built_wheel(root, may_build)
        shutil.rmtree(venv, ignore_errors=True)
        made = run([sys.executable, "-m", "venv", str(venv)], 300)
        if made.returncode != 0:
            pytest.fail(f"venv: {made.stderr[-2000:]}")
        wheels = root / "wheels"
        # The dependencies' wheels are cached beside ours (CI caches the directory): offline first, then the index.
        deps = run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(wheels), *DEPS], 600)
        if deps.returncode != 0:
            got = run([str(python), "-m", "pip", "download", "--timeout", "60", "--retries", "2", "--only-binary",
                       ":all:", "-d", str(wheels), *DEPS], 900)
            deps = run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(wheels), *DEPS], 600) \
                if got.returncode == 0 else got
        if deps.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            pytest.skip(f"llama.cpp tier not built: `pip install {' '.join(DEPS)}` failed (package index "
                        f"unreachable?): {pip_error(deps.stderr or deps.stdout)}")
        inst = run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], 600)
        if inst.returncode != 0:
            pytest.fail(f"installing {wheel.name}: {pip_error(inst.stderr or inst.stdout)}")
        (venv / READY).write_text(pins)
        return python


@pytest.fixture(scope="session")
def llama_python(pytestconfig: pytest.Config) -> Path:
    return ensure_venv(cache_location(), build_allowed(pytestconfig))


def probe(python: Path, **models: Path) -> dict:
    proc = subprocess.run([str(python), str(PROBE), *(f"{k}={v}" for k, v in models.items())], check=False,
                          capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert proc.returncode == 0, f"probe exited {proc.returncode}:\n{proc.stderr[-6000:]}"
    report = json.loads(proc.stdout)
    report["log"] = proc.stderr
    return report


def to_gguf(src: Path, dest: Path, target: Path) -> Path:
    from conftest import run_cli

    result = run_cli("--to", "gguf", "--target-gguf", target, src, dest)
    assert result.exit_code == 0, result.stderr
    return next(dest.glob("*.gguf"))


# ----------------------------------------------------------------------------------- the tests

def test_specforge_drafter_loads_with_its_trained_layers(llama_python: Path, tmp_path: Path):
    """SpecForge wrote nested SGLang ids [1, 3, 4] = boundaries [2, 4, 5]. On a 12-layer target those are not the
    engine defaults [2, 6, 9] (what llama.cpp's own converter writes for this config, which it reads no ids from);
    the GGUF we write loads in llama.cpp with target_layer_ids [2, 4, 5]."""
    target = write_target_gguf(tmp_path / "target.gguf", layers=12, hidden=64, vocab=512)
    draft = to_gguf(DATA / "specforge-sglang" / "checkpoint", tmp_path / "draft", target)
    got = probe(llama_python, target=target, draft=draft)
    assert got["target"]["loaded"] and got["target"]["n_layer"] == 12, got["log"][-3000:]
    assert got["draft"]["loaded"], got["log"][-3000:]
    assert got["draft"]["architecture"] == "eagle3"
    assert got["draft"]["target_layer_ids"] == [2, 4, 5]
    assert got["draft"]["n_vocab"] == got["target"]["n_vocab"] == 512


def test_sglang_nested_ids_that_are_not_the_defaults_load_as_trained(llama_python: Path, tmp_path: Path):
    """An SGLang-layout drafter trained on boundaries [1, 3, 6] of an 8-layer target (nested ids [0, 2, 5]):
    llama.cpp's own converter writes [2, 4, 5] for it (its defaults; checked by running the converter vendored
    in this sdist). Ours loads with [1, 3, 6]."""
    spec = DrafterSpec(vocab_size=512, draft_vocab_size=128, capture_boundaries=(1, 3, 6))
    src = build_drafter(tmp_path / "src", "sglang", spec)
    assert json.loads((src / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == \
        [0, 2, 5]
    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=spec.ht, vocab=512)
    got = probe(llama_python, draft=to_gguf(src, tmp_path / "draft", target))
    assert got["draft"]["loaded"] and got["draft"]["target_layer_ids"] == [1, 3, 6], got["log"][-3000:]


@pytest.mark.parametrize("changes", [
    {"capture_boundaries": (1, 3, 6)},
    {"capture_boundaries": (1, 3, 6), "norm_before_fc": True, "norm_before_residual": True},
    {"capture_boundaries": None, "embed_tokens": True, "draft_vocab_size": None},
    {"head_dim": 16, "dtype": "F16",
     "extra": {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 64}, "rope_theta": 500000.0}},
], ids=["non-default ids", "norm_before_fc + norm_before_residual", "default ids, full vocab, own embedding",
        "head_dim 16, F16, llama3 rope"])
def test_builder_variants_load(llama_python: Path, tmp_path: Path, changes: dict):
    spec = DrafterSpec(vocab_size=512, draft_vocab_size=128).with_(**changes)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=spec.ht, vocab=512)
    draft = to_gguf(src, tmp_path / "draft", target)
    got = probe(llama_python, target=target, draft=draft)
    assert got["draft"]["loaded"], got["log"][-3000:]
    assert got["draft"]["target_layer_ids"] == list(spec.capture_boundaries or (2, 4, 5))


def test_llama_cpp_refuses_what_it_cannot_hold(llama_python: Path, tmp_path: Path):
    """The probe sees llama.cpp's own refusals: a draft whose target_layers has 2 entries does not load."""
    import gguf
    import numpy as np

    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=32, vocab=512)
    draft = to_gguf(build_drafter(tmp_path / "src", "speculators", DrafterSpec(vocab_size=512, draft_vocab_size=128)),
                    tmp_path / "draft", target)
    reader = gguf.GGUFReader(draft)
    bad = tmp_path / "bad.gguf"
    w = gguf.GGUFWriter(bad, "eagle3")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        main = field.types[0]
        if key == "eagle3.target_layers":
            w.add_key_value(key, [2, 4], main, sub_type=gguf.GGUFValueType.INT32)
        elif main == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            value = [bytes(field.parts[i]) for i in field.data] if sub == gguf.GGUFValueType.STRING else \
                [v for i in field.data for v in field.parts[i].tolist()]
            w.add_key_value(key, value, main, sub_type=sub)
        else:
            w.add_key_value(key, field.contents(), main)
    for t in reader.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got = probe(llama_python, good=draft, bad=bad)
    assert got["good"]["loaded"] and got["good"]["target_layer_ids"] == [2, 4, 5]
    assert not got["bad"]["loaded"]


# The EAGLE-3 loop lives in libllama-common's C++ (common_speculative), which llama-cpp-python does not bind: it
# runs through llama.cpp's llama-speculative-simple, built from the same vendored tree (cmake, target
# llama-speculative-simple, -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF: 825 s on 2 busy cores), found through
# $EAGLE3_LLAMA_SPECULATIVE_SIMPLE or in the tier's cache directory (bin/).
_cached_binary = cache_location() / "bin" / "llama-speculative-simple"
SPECULATIVE_SIMPLE = os.environ.get("EAGLE3_LLAMA_SPECULATIVE_SIMPLE") or (
    str(_cached_binary) if _cached_binary.is_file() else None)


# llama.cpp leaks its asynchronous logger on purpose (common/log.cpp, llama.cpp issue 22142): whatever its log
# thread has not printed when main() returns is lost, and on a loaded machine that was the closing statistics
# (24 of 30 runs beside 3 busy loops; all 6 tries once, with the whole suite beside one). A preloaded destructor
# holds the exiting process for half a second, so that the thread drains its queue (0 of 30 lost with it).
LOG_DRAIN_SHIM = r"""
#include <unistd.h>
__attribute__((destructor)) static void let_the_log_thread_drain(void) { usleep(500000); }
"""


@pytest.fixture(scope="module")
def log_drain_preload(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment that preloads the shim (compiled with the machine's cc; without one the runs are retried)."""
    folder = tmp_path_factory.mktemp("log-drain")
    (folder / "drain.c").write_text(LOG_DRAIN_SHIM)
    compiler = shutil.which("cc") or shutil.which("gcc")
    built = compiler and subprocess.run([compiler, "-shared", "-fPIC", "-o", str(folder / "drain.so"),
                                         str(folder / "drain.c")], capture_output=True).returncode == 0
    return {**os.environ, "LD_PRELOAD": str(folder / "drain.so")} if built else dict(os.environ)


@pytest.mark.skipif(not SPECULATIVE_SIMPLE, reason="no llama-speculative-simple: set EAGLE3_LLAMA_SPECULATIVE_SIMPLE "
                    "or put one in the tier's cache bin/ (cmake of the same vendored llama.cpp)")
@pytest.mark.parametrize("layout, changes", [
    ("sglang", {"capture_boundaries": (1, 3, 6)}),
    ("speculators", {"capture_boundaries": (1, 3, 6), "norm_before_fc": True, "norm_before_residual": True}),
    ("speculators", {"head_dim": 16, "dtype": "F16", "extra": {"rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}, "rope_theta": 500000.0}}),
], ids=["sglang nested ids", "norm_before_fc + norm_before_residual", "head_dim 16, F16, llama3 rope"])
def test_speculative_steps_run_with_our_draft(tmp_path: Path, layout: str, changes: dict,
                                              log_drain_preload: dict[str, str]):
    """llama.cpp's own EAGLE-3 loop (common_speculative, --spec-type draft-eagle3) drafts with our GGUF for 16
    steps beside a tiny target (random weights: nothing is accepted; the graph runs and reads the trained ids)."""
    spec = DrafterSpec(vocab_size=512, draft_vocab_size=128).with_(**changes)
    src = build_drafter(tmp_path / "src", layout, spec)
    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=spec.ht, vocab=512)
    draft = to_gguf(src, tmp_path / "draft", target)
    for _attempt in range(3):  # the statistics are printed last: run again if the log lost them all the same
        proc = subprocess.run([SPECULATIVE_SIMPLE, "-m", str(target), "-md", str(draft), "--spec-type",
                               "draft-eagle3", "--spec-draft-n-max", "3", "-p", "hello world", "-n", "16", "--temp",
                               "0", "--top-k", "1", "--seed", "42", "-c", "256", "-lv", "4"],
                              capture_output=True, timeout=600, env=log_drain_preload)
        log = proc.stderr.decode(errors="replace")
        assert proc.returncode == 0, log[-3000:]
        if "n_drafted =" in log:
            break
    ids = list(spec.capture_boundaries or (2, 4, 5))
    assert f"EAGLE3 extract_layers = [{', '.join(map(str, ids))}]" in log
    drafted = [int(line.split("=")[-1]) for line in log.splitlines() if "n_drafted =" in line]
    assert drafted and drafted[-1] > 0, log[-3000:]
