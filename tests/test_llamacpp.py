"""A real llama.cpp loads the GGUF drafters `--to gguf` writes, and runs its own EAGLE-3 loop with them.

llama-cpp-python 0.3.36 vendors llama.cpp 0c1e57098, whose EAGLE-3 code is the final one (byte-identical to b11434
in src/models/eagle3.cpp). On first run the tier builds, once, from that sdist (pip download from the package index)
and with cmake and ninja from the index: one CMake build of the sdist's own CMakeLists (what its wheel runs, CPU only,
no -march=native: CMAKE_ARGS below), for two targets: libllama (with its ggml libraries), installed beside
llama-cpp-python's Python package in a venv, and llama.cpp's `llama-speculative-simple`, linked to the same
libraries. Both land in $EAGLE3_LLAMACPP_CACHE, else ~/.cache/eagle3-convert/llamacpp-<hash of the pins>; later
runs reuse them. Only an unreachable package index skips the tier (tests/conftest.py fails any other skip); a
failed compile is a failure.

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
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import peer_venv
import pytest
from builders import DrafterSpec, build_drafter
from conftest import DATA
from gguf_target import rewrite_gguf, write_target_gguf

pytestmark = pytest.mark.llamacpp

PACKAGE = "llama-cpp-python==0.3.36"
# The wheel's own CMake arguments (CPU only, no CUDA, no -march=native: it runs on any x86-64 box), plus the
# examples folder, where llama-speculative-simple lives; only the two targets below are compiled.
CMAKE_ARGS = ("-DCMAKE_BUILD_TYPE=Release", "-DLLAVA_BUILD=OFF", "-DGGML_NATIVE=OFF", "-DGGML_CUDA=OFF",
              "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_EXAMPLES=ON",
              "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_OPENSSL=OFF")
TARGETS = ("llama", "llama-speculative-simple")
BUILD_TOOLS = ("cmake==3.31.10", "ninja==1.13.2")
# What `import llama_cpp` needs (its declared dependencies), pinned.
DEPS = ("numpy==2.4.6", "typing-extensions==4.16.0", "diskcache==5.6.3", "jinja2==3.1.6")
BUILD_TIMEOUT_S = 60 * 60  # the compile, paid once per machine
PROBE = Path(__file__).resolve().parent / "llamacpp" / "probe.py"
READY = ".eagle3-llamacpp-ready"
TIER = "llama.cpp tier"


def pins_text() -> str:
    return (f"python {platform.python_version()} at {sys.base_prefix} on {platform.machine()}\n{PACKAGE}\n"
            f"{' '.join(CMAKE_ARGS)}\n{' '.join(TARGETS)}\n{' '.join(BUILD_TOOLS)}\n{' '.join(DEPS)}\n")


def cache_location() -> Path:
    if os.environ.get("EAGLE3_LLAMACPP_CACHE"):
        return Path(os.environ["EAGLE3_LLAMACPP_CACHE"]).expanduser().absolute()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "eagle3-convert" / f"llamacpp-{hashlib.sha256(pins_text().encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class LlamaCpp:
    root: Path

    @property
    def python(self) -> Path:  # a venv holding llama-cpp-python's package over our libllama
        return self.root / "venv" / "bin" / "python"

    @property
    def speculative_simple(self) -> Path:
        return self.root / "bin" / "llama-speculative-simple"

    @property
    def lib(self) -> Path:  # libllama and the ggml libraries, shared by the two
        return self.root / "lib"

    def env(self, **extra: str) -> dict[str, str]:
        return peer_venv.subprocess_env(LD_LIBRARY_PATH=str(self.lib), **extra)


def step(argv: list[str], what: str, deadline: float, network: bool = False, **env: str) -> None:
    """One build command: a failure skips the tier only when it fetched from an unreachable index."""
    try:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, env=peer_venv.subprocess_env(**env),
                              timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{TIER}: `{what}` did not finish within the {BUILD_TIMEOUT_S} s build limit", pytrace=False)
    if done.returncode == 0:
        return
    if network:
        peer_venv.unavailable(TIER, what, done.stderr + done.stdout)
    pytest.fail(f"{TIER}: `{what}` failed:\n{(done.stderr + done.stdout)[-4000:]}", pytrace=False)


def build(tier: LlamaCpp) -> None:
    """venv + pinned tools and deps, the sdist, one CMake build of the two targets, installed; the sources removed."""
    root, deadline = tier.root, time.monotonic() + BUILD_TIMEOUT_S
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    step([sys.executable, "-m", "venv", str(root / "venv")], "python -m venv", deadline)
    pip = [str(tier.python), "-m", "pip", "install", "--timeout", "60", "--retries", "2"]
    step([*pip, *DEPS, *BUILD_TOOLS], f"pip install {' '.join(DEPS + BUILD_TOOLS)}", deadline, network=True)
    step([str(tier.python), "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--timeout", "60",
          "--retries", "2", PACKAGE, "-d", str(root / "sdist")], f"pip download {PACKAGE}", deadline, network=True)
    with tarfile.open(next((root / "sdist").glob("llama_cpp_python-*.tar.gz"))) as sdist:
        sdist.extractall(root / "sdist", filter="data")
    source = next(p for p in (root / "sdist").iterdir() if p.is_dir())
    tools = tier.python.parent
    step([str(tools / "cmake"), "-S", str(source), "-B", str(root / "build"), "-G", "Ninja",
          f"-DCMAKE_MAKE_PROGRAM={tools / 'ninja'}", *CMAKE_ARGS], "cmake (configure)", deadline)
    begun = time.monotonic()
    step([str(tools / "cmake"), "--build", str(root / "build"), "--target", *TARGETS, "-j", str(os.cpu_count() or 2)],
         f"cmake --build --target {' '.join(TARGETS)}", deadline)
    site = Path(subprocess.run([str(tier.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    shutil.copytree(source / "llama_cpp", site / "llama_cpp")
    tier.lib.mkdir()
    for library in (root / "build").rglob("lib*.so*"):
        shutil.copy2(library, tier.lib / library.name)  # links followed: every soname a real file
    (site / "llama_cpp" / "lib").symlink_to(tier.lib)  # where llama_cpp looks for libllama.so
    tier.speculative_simple.parent.mkdir()
    shutil.copy2(next((root / "build").rglob("llama-speculative-simple")), tier.speculative_simple)
    (root / "BUILD-SECONDS").write_text(f"{time.monotonic() - begun:.0f}\n")
    shutil.rmtree(root / "build")
    shutil.rmtree(root / "sdist")


def ensure_tier(root: Path) -> LlamaCpp:
    """The built tier, building it under a lock the first time (concurrent runs wait instead of racing)."""
    tier, pins = LlamaCpp(root), pins_text()
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / READY).is_file() and (root / READY).read_text() == pins:
            return tier
        build(tier)
        (root / READY).write_text(pins)
        return tier


@pytest.fixture(scope="session")
def llamacpp() -> LlamaCpp:
    return ensure_tier(cache_location())


def probe(tier: LlamaCpp, **models: Path) -> dict:
    proc = subprocess.run([str(tier.python), str(PROBE), *(f"{k}={v}" for k, v in models.items())], check=False,
                          capture_output=True, text=True, env=tier.env(), timeout=600)
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

def test_specforge_drafter_loads_with_its_trained_layers(llamacpp: LlamaCpp, tmp_path: Path):
    """SpecForge wrote nested SGLang ids [1, 3, 4] = boundaries [2, 4, 5]. On a 12-layer target those are not the
    engine defaults [2, 6, 9] (what llama.cpp's own converter writes for this config, which it reads no ids from);
    the GGUF we write loads in llama.cpp with target_layer_ids [2, 4, 5]."""
    target = write_target_gguf(tmp_path / "target.gguf", layers=12, hidden=64, vocab=512)
    draft = to_gguf(DATA / "specforge-sglang" / "checkpoint", tmp_path / "draft", target)
    got = probe(llamacpp, target=target, draft=draft)
    assert got["target"]["loaded"] and got["target"]["n_layer"] == 12, got["log"][-3000:]
    assert got["draft"]["loaded"], got["log"][-3000:]
    assert got["draft"]["architecture"] == "eagle3"
    assert got["draft"]["target_layer_ids"] == [2, 4, 5]
    assert got["draft"]["n_vocab"] == got["target"]["n_vocab"] == 512


def test_sglang_nested_ids_that_are_not_the_defaults_load_as_trained(llamacpp: LlamaCpp, tmp_path: Path):
    """An SGLang-layout drafter trained on boundaries [1, 3, 6] of an 8-layer target (nested ids [0, 2, 5]):
    llama.cpp's own converter writes [2, 4, 5] for it (its defaults; checked by running the converter vendored
    in this sdist). Ours loads with [1, 3, 6]."""
    spec = DrafterSpec(vocab_size=512, draft_vocab_size=128, capture_boundaries=(1, 3, 6))
    src = build_drafter(tmp_path / "src", "sglang", spec)
    assert json.loads((src / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == \
        [0, 2, 5]
    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=spec.ht, vocab=512)
    got = probe(llamacpp, draft=to_gguf(src, tmp_path / "draft", target))
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
def test_builder_variants_load(llamacpp: LlamaCpp, tmp_path: Path, changes: dict):
    spec = DrafterSpec(vocab_size=512, draft_vocab_size=128).with_(**changes)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=spec.ht, vocab=512)
    draft = to_gguf(src, tmp_path / "draft", target)
    got = probe(llamacpp, target=target, draft=draft)
    assert got["draft"]["loaded"], got["log"][-3000:]
    assert got["draft"]["target_layer_ids"] == list(spec.capture_boundaries or (2, 4, 5))


def test_llama_cpp_refuses_what_it_cannot_hold(llamacpp: LlamaCpp, tmp_path: Path):
    """The probe sees llama.cpp's own refusals: a draft whose target_layers has 2 entries does not load."""
    import gguf

    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=32, vocab=512)
    draft = to_gguf(build_drafter(tmp_path / "src", "speculators", DrafterSpec(vocab_size=512, draft_vocab_size=128)),
                    tmp_path / "draft", target)
    bad = rewrite_gguf(draft, tmp_path / "bad.gguf", replace={
        "eagle3.target_layers": ([2, 4], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)})
    got = probe(llamacpp, good=draft, bad=bad)
    assert got["good"]["loaded"] and got["good"]["target_layer_ids"] == [2, 4, 5]
    assert not got["bad"]["loaded"]


# The EAGLE-3 loop lives in libllama-common's C++ (common_speculative), which llama-cpp-python does not bind: it runs
# through llama.cpp's llama-speculative-simple, built by the tier from the same vendored tree.


# llama.cpp leaks its asynchronous logger on purpose (common/log.cpp, llama.cpp issue 22142): whatever its log
# thread has not printed when main() returns is lost, and on a loaded machine that was the closing statistics
# (24 of 30 runs beside 3 busy loops; all 6 tries once, with the whole suite beside one). A preloaded destructor
# holds the exiting process for half a second, so that the thread drains its queue (0 of 30 lost with it).
LOG_DRAIN_SHIM = r"""
#include <unistd.h>
__attribute__((destructor)) static void let_the_log_thread_drain(void) { usleep(500000); }
"""


@pytest.fixture(scope="module")
def log_drain_preload(llamacpp: LlamaCpp, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The tier's environment, preloading the shim (compiled with the machine's cc; without one the runs are
    retried)."""
    folder = tmp_path_factory.mktemp("log-drain")
    (folder / "drain.c").write_text(LOG_DRAIN_SHIM)
    compiler = shutil.which("cc") or shutil.which("gcc")
    built = compiler and subprocess.run([compiler, "-shared", "-fPIC", "-o", str(folder / "drain.so"),
                                         str(folder / "drain.c")], capture_output=True).returncode == 0
    return llamacpp.env(LD_PRELOAD=str(folder / "drain.so")) if built else llamacpp.env()


@pytest.mark.parametrize("layout, changes", [
    ("sglang", {"capture_boundaries": (1, 3, 6)}),
    ("speculators", {"capture_boundaries": (1, 3, 6), "norm_before_fc": True, "norm_before_residual": True}),
    ("speculators", {"head_dim": 16, "dtype": "F16", "extra": {"rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}, "rope_theta": 500000.0}}),
], ids=["sglang nested ids", "norm_before_fc + norm_before_residual", "head_dim 16, F16, llama3 rope"])
def test_speculative_steps_run_with_our_draft(llamacpp: LlamaCpp, tmp_path: Path, layout: str, changes: dict,
                                              log_drain_preload: dict[str, str]):
    """llama.cpp's own EAGLE-3 loop (common_speculative, --spec-type draft-eagle3) drafts with our GGUF for 16
    steps beside a tiny target (random weights: nothing is accepted; the graph runs and reads the trained ids)."""
    spec = DrafterSpec(vocab_size=512, draft_vocab_size=128).with_(**changes)
    src = build_drafter(tmp_path / "src", layout, spec)
    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=spec.ht, vocab=512)
    draft = to_gguf(src, tmp_path / "draft", target)
    for _attempt in range(3):  # the statistics are printed last: run again if the log lost them all the same
        proc = subprocess.run([str(llamacpp.speculative_simple), "-m", str(target), "-md", str(draft), "--spec-type",
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
