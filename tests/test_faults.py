"""Faults during a real conversion: SIGKILL at random points, a full disk, a read-only
destination, two writers racing for one DST. DST is always absent or complete, never partial.

Each conversion is a real `python -m eagle3_convert` process on a ~175 MB drafter (random
bytes, so a half-copied tensor cannot pass for a whole one).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import without_root_powers
from hostile import EXAMPLE, subprocess_env

from eagle3_convert.convert import read_source
from eagle3_convert.converters.base import ConvertOptions, write_directory
from eagle3_convert.converters.speculators import LAYOUT as SPECULATORS
from eagle3_convert.vocab_map import VocabMap
from eagle3_convert.drafter import (
    Drafter,
    DrafterConfig,
    TargetIdentity,
    expected_shapes,
)
from eagle3_convert.safetensors_io import DTYPE_SIZES, InMemoryTensor, tensor_sha256

ERROR_LINE = re.compile(r"^error: .+ \[(E-[A-Z0-9-]+)\] — hint: .+$")
PROCESS_LIMIT_S = 300  # a hang guard, not a speed assertion


def big_drafter(seed: int, verifier: str) -> Drafter:
    """Hidden 2048, intermediate 4096, draft vocab 16000 of 32000: ~175 MB of bf16, random bytes."""
    import numpy as np

    rng = np.random.default_rng(seed)
    config = DrafterConfig(
        hidden_size=2048, intermediate_size=4096, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
        vocab_size=32000, draft_vocab_size=16000, capture_boundaries=[2, 16, 29],
        rope={"rope_theta": 500000.0},
        target=TargetIdentity(name_or_path=verifier, architectures=["LlamaForCausalLM"], model_type="llama",
                              num_hidden_layers=32, hidden_size=2048, vocab_size=32000))
    tensors = {}
    for name, shape in expected_shapes(config).items():
        n = DTYPE_SIZES["BF16"]
        for d in shape:
            n *= d
        tensors[name] = InMemoryTensor("BF16", shape, rng.integers(0, 256, n, dtype=np.uint8).tobytes())
    target_ids = tuple(sorted(int(i) for i in rng.choice(32000, 16000, replace=False)))
    return Drafter(config, tensors, VocabMap(target_ids, 32000))


def write_speculators(dest: Path, drafter: Drafter) -> Path:
    plan = SPECULATORS.plan(drafter, ConvertOptions())
    write_directory(dest, plan.config, plan.tensors, {}, src=None, force=False)
    return dest


def content(path: Path) -> dict[str, str]:
    """A full read of a checkpoint: canonical tensor digests, the vocab map and the config."""
    drafter = read_source(str(path)).drafter
    out = {name: tensor_sha256(src) for name, src in drafter.tensors.items()}
    if drafter.vocab is not None:
        out["vocab"] = hashlib.sha256(repr(drafter.vocab.target_ids).encode()).hexdigest()
    out["config.json"] = hashlib.sha256((path / "config.json").read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Two big drafters that differ in every tensor and in the verifier, and what converting each gives."""
    root = tmp_path_factory.mktemp("big")
    a = write_speculators(root / "a", big_drafter(1, "org/target-a"))
    b = write_speculators(root / "b", big_drafter(2, "org/target-b"))
    state = root / "work"
    state.mkdir()
    expected, took = {}, []
    for name, src in (("a", a), ("b", b)):
        started = time.monotonic()
        proc = convert_process(src, root / f"ref-{name}", state)
        took.append(time.monotonic() - started)
        assert proc.returncode == 0, proc.stderr
        expected[name] = content(root / f"ref-{name}")
        assert expected[name] != {}
    assert expected["a"] != expected["b"]
    # How long a whole conversion takes here: the random kills spread over it (not asserted on).
    yield {"a": a, "b": b, "root": root, "expected": expected, "convert_s": max(took),
           "outputs": {"a": root / "ref-a", "b": root / "ref-b"}}
    shutil.rmtree(root, ignore_errors=True)  # ~1 GB: do not leave it to pytest's tmp retention


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "eagle3_convert", *args]


def sigint_delivered() -> None:
    """In the child, before exec: SIGINT acts as in a terminal. A test run started as a background job (a shell
    without job control, some CI runners) ignores SIGINT, and an ignored signal stays ignored across exec."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(proc: subprocess.Popen, ready) -> tuple[str, str]:
    """SIGINT to `proc` (started with preexec_fn=sigint_delivered) once `ready(proc)` returns, if it still runs; its
    output. It is never left running."""
    try:
        ready(proc)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=PROCESS_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def convert_process(src: Path, dst: Path, work: Path, *extra: str, **popen) -> subprocess.CompletedProcess:
    return subprocess.run(cli("--to", "sglang", str(src), str(dst), "--quiet", *extra), cwd=work,
                          env=subprocess_env(work), capture_output=True, text=True, timeout=PROCESS_LIMIT_S, **popen)


def leftovers(parent: Path, dst_name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name != dst_name)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: str) -> str:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    match = ERROR_LINE.match(errors[0])
    assert match and match.group(1) == code, errors[0]
    return errors[0]


# ------------------------------------------------------------------ SIGKILL

def _wait_for_temp_file(parent: Path, dst_name: str, proc: subprocess.Popen) -> bool:
    """Until a file exists inside the writer's temp dir (the copy has begun), or the process ended."""
    while proc.poll() is None:
        for tmp in parent.glob(f".{dst_name}.tmp-*"):
            try:
                if any(tmp.iterdir()):
                    return True
            except FileNotFoundError:
                pass
        time.sleep(0.001)
    return False


KILLS = [("mid-copy", None), *((f"random-{i}", i) for i in range(4)), ("random-force", "force")]
# A run the kill came too late for (the conversion had finished) proves nothing: it is run again, killed earlier;
# the test fails if no run was killed.
ATTEMPTS = 3


@pytest.mark.parametrize("name, how", KILLS, ids=[k[0] for k in KILLS])
def test_sigkill_leaves_dst_absent_or_complete(big, tmp_path: Path, name: str, how):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "dst"
    force = how == "force"
    argv = cli("--to", "sglang", str(big["a"]), str(dst), "--quiet", *(("--force",) if force else ()))
    # Anywhere in start-up, reading, the copy, the hash, the rename, or just after.
    delay = rng.uniform(0.0, big["convert_s"])
    for attempt in range(ATTEMPTS):
        if dst.exists():  # the new output of a run that was not killed
            shutil.rmtree(dst)
        if force:  # DST holds b's complete output when a's conversion is killed: old and new differ
            shutil.copytree(big["outputs"]["b"], dst, copy_function=os.link)
        proc = subprocess.Popen(argv, cwd=tmp_path, env=subprocess_env(tmp_path), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            if how is None:
                assert _wait_for_temp_file(out, "dst", proc), "the writer ended before its copy could be interrupted"
            else:
                time.sleep(delay * 0.5 ** attempt)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=PROCESS_LIMIT_S)
        if proc.returncode == -signal.SIGKILL:
            break
    where = f"{name} (seed {seed}, exit {proc.returncode}, run {attempt + 1})"
    assert proc.returncode == -signal.SIGKILL, f"{where}: the conversion finished before the kill in {ATTEMPTS} runs"
    if how is None:
        assert not dst.exists(), where
    if force:  # the exchange is atomic: DST is never missing, and is the old output or the complete new one
        assert dst.exists(), f"{where}: DST is missing after a kill under --force"
        assert content(dst) in (big["expected"]["a"], big["expected"]["b"]), f"{where}: DST is partial"
    elif dst.exists():
        assert content(dst) == big["expected"]["a"], f"{where}: DST is partial"
    # SIGKILL leaves no chance to clean up: only the writer's own temp dirs (and, under --force, the
    # moved-aside old DST) may remain.
    stray = [n for n in leftovers(out, "dst") if not re.match(r"^\.dst\.(tmp|old)-", n)]
    assert not stray, f"{where}: {stray}"
    # The next conversion to the same DST succeeds, and clears the dead writer's temp dir.
    again = convert_process(big["a"], dst, tmp_path, "--force")
    assert again.returncode == 0, f"{where}: {again.stderr}"
    assert content(dst) == big["expected"]["a"]
    assert not [n for n in leftovers(out, "dst") if n.startswith(".dst.tmp-")], f"{where}: stale temp dir kept"


# ------------------------------------------------------------------ no space, no permission

def _tiny_src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(EXAMPLE, src)
    return src


def _try_mount_tmpfs(mountpoint: Path, size: str) -> bool:
    mountpoint.mkdir()
    try:
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def test_enospc_on_a_full_tmpfs(tmp_path: Path):
    """A real full filesystem: a 96 KiB tmpfs cannot hold the 131 KiB weights."""
    full = tmp_path / "full"
    if not _try_mount_tmpfs(full, "96k"):
        pytest.skip("cannot mount a tmpfs here (not root); test_efbig_under_rlimit_fsize covers a failing write")
    try:
        proc = convert_process(_tiny_src(tmp_path), full / "dst", tmp_path)
        message = assert_one_line_error(proc, "E-DEST")
        assert "No space left on device" in message
        assert list(full.iterdir()) == [], "the temp dir was not removed"
    finally:
        subprocess.run(["umount", str(full)], check=True, timeout=30)


def test_efbig_under_rlimit_fsize(tmp_path: Path):
    """A write that fails mid-file (RLIMIT_FSIZE: EFBIG), whoever runs the tests."""

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    src = _tiny_src(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    proc = convert_process(src, out / "dst", tmp_path, "--no-record", preexec_fn=limit_file_size)
    message = assert_one_line_error(proc, "E-DEST")
    assert "File too large" in message
    assert list(out.iterdir()) == []


def test_read_only_destination_parent(tmp_path: Path):
    src = _tiny_src(tmp_path)
    parent = tmp_path / "read-only"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        argv = [*without_root_powers(), *cli("--to", "sglang", str(src), str(parent / "dst"), "--no-record")]
        proc = subprocess.run(argv, cwd=tmp_path, env=subprocess_env(tmp_path), capture_output=True, text=True,
                              timeout=PROCESS_LIMIT_S)
        message = assert_one_line_error(proc, "E-DEST")
        assert "Permission denied" in message
        assert list(parent.iterdir()) == []
    finally:
        parent.chmod(0o755)


# ------------------------------------------------------------------ two writers, one DST

@pytest.mark.parametrize("round_", range(3))
def test_two_converts_to_one_dst(big, tmp_path: Path, round_: int):
    """Different drafters raced into one DST: one wins whole, the other refuses; never a mix."""
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "dst"
    procs = {name: subprocess.Popen(cli("--to", "sglang", str(big[name]), str(dst), "--quiet"), cwd=tmp_path,
                                    env=subprocess_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
             for name in ("a", "b")}
    results = {name: (p.wait(timeout=PROCESS_LIMIT_S), p.stdout.read(), p.stderr.read()) for name, p in procs.items()}
    for p in procs.values():
        p.stdout.close()
        p.stderr.close()
    winners = [name for name, (rc, _, _) in results.items() if rc == 0]
    assert len(winners) == 1, results
    loser = "b" if winners == ["a"] else "a"
    rc, stdout, stderr = results[loser]
    assert_one_line_error(subprocess.CompletedProcess([], rc, stdout, stderr), "E-DEST")
    assert content(dst) == big["expected"][winners[0]]
    assert leftovers(out, "dst") == []
