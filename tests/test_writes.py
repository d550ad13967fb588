"""Writes that keep their word (issue 12, Deliver 8).

- Ctrl-C (SIGINT) at any instant of a conversion: the message printed is true (DST holds either
  the old output or the complete new one, as the message says) and no `.DST.tmp-*`/`.DST.old-*`
  is left beside DST. Each interrupt is sent to a real `python -m eagle3_convert` process on a
  ~175 MB drafter, at points chosen by watching the writer's files (temp dir created, copy begun,
  sidecar written, DST swapped) and at times spread over a whole conversion.
- `--force` replaces only a directory that holds a checkpoint (or an empty one); otherwise it
  refuses with a code and names what it would delete.
- `--force .` (or an ancestor of the cwd) is a clear refusal, never "Device or resource busy".
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostile import EXAMPLE, subprocess_env
from test_faults import (PROCESS_LIMIT_S, assert_one_line_error, big_drafter, cli, interrupt, sigint_delivered,
                         write_speculators)

SIDECAR = "eagle3-convert.json"


def digest(path: Path) -> dict[str, str]:
    """Every file of a checkpoint but the sidecar (its lineage holds a timestamp), by content."""
    out = {}
    for p in sorted(path.iterdir()):
        if p.name != SIDECAR:
            h = hashlib.sha256()
            with open(p, "rb") as f:
                while chunk := f.read(1 << 22):
                    h.update(chunk)
            out[p.name] = h.hexdigest()
    return out


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Two big drafters (`new` is converted in every test, `old` is what DST held before) and the
    sglang output of each, converted once without interruption."""
    root = tmp_path_factory.mktemp("writes")
    srcs = {"new": write_speculators(root / "new", big_drafter(11, "org/target-new")),
            "old": write_speculators(root / "old", big_drafter(12, "org/target-old"))}
    work = root / "work"
    work.mkdir()
    refs, took = {}, []
    for name, src in srcs.items():
        started = time.monotonic()
        proc = subprocess.run(cli("--to", "sglang", str(src), str(root / f"ref-{name}"), "--quiet"), cwd=work,
                              env=subprocess_env(work), capture_output=True, text=True, timeout=PROCESS_LIMIT_S)
        took.append(time.monotonic() - started)
        assert proc.returncode == 0, proc.stderr
        refs[name] = digest(root / f"ref-{name}")
    assert refs["new"] != refs["old"]
    yield {"src": srcs["new"], "ref_old": root / "ref-old", "digest": refs, "convert_s": max(took)}
    shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ where to interrupt

def _temp_dirs(parent: Path) -> list[Path]:
    return list(parent.glob(".dst.tmp-*"))


def _wait(proc: subprocess.Popen, ready) -> None:
    while proc.poll() is None and not ready():
        time.sleep(0.0005)


def _has(parent: Path, name: str | None):
    def ready() -> bool:
        for tmp in _temp_dirs(parent):
            try:
                if name is None or any(p.name == name for p in tmp.iterdir()):
                    return True
            except FileNotFoundError:
                pass
        return False
    return ready


def _swapped(dst: Path):
    before = os.stat(dst).st_ino if dst.exists() else None

    def ready() -> bool:
        try:
            return os.stat(dst).st_ino != before and (dst / SIDECAR).exists()
        except FileNotFoundError:
            return False
    return ready


def _point(kind: str, out: Path, dst: Path, convert_s: float):
    """A function that blocks until the moment to send SIGINT."""
    if kind == "temp-dir":  # right after mkdtemp: the dir exists, still empty, maybe not yet locked
        return lambda proc: _wait(proc, _has(out, None))
    if kind == "mid-copy":
        return lambda proc: _wait(proc, _has(out, "model.safetensors"))
    if kind == "sidecar":  # the last file: the swap comes next
        return lambda proc: _wait(proc, _has(out, SIDECAR))
    if kind == "swapped":  # DST is the new output; the old one is being removed, or recording runs
        swapped = _swapped(dst)
        return lambda proc: _wait(proc, swapped)
    fraction = float(kind.split("-")[1])
    return lambda proc: time.sleep(fraction * convert_s)


PHASES = [f"{p}-{i}" for p in ("temp-dir", "mid-copy", "sidecar", "swapped") for i in range(3)]
TIMED = [f"time-{i / 16:.4f}" for i in range(17)]
POINTS = [(force, point) for point in PHASES + TIMED for force in (True,)] + \
         [(False, point) for point in ("temp-dir-0", "mid-copy-0", "sidecar-0", "swapped-0",
                                       *TIMED[::4])]


# A run the interrupt reached too late (the conversion had finished) proves nothing about interrupts: it is run
# again, a timed point earlier; the test fails if no run of the point was interrupted.
ATTEMPTS = 3


@pytest.mark.parametrize("force, point", POINTS, ids=[f"{'force' if f else 'new'}-{p}" for f, p in POINTS])
def test_sigint_message_is_true_and_nothing_is_left(outputs, tmp_path: Path, force: bool, point: str):
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "dst"
    kind = point.rsplit("-", 1)[0] if not point.startswith("time-") else point
    argv = cli("--to", "sglang", str(outputs["src"]), str(dst), "--quiet", *(("--force",) if force else ()))
    for attempt in range(ATTEMPTS):
        if dst.exists():  # the new output of a run that was not interrupted
            shutil.rmtree(dst)
        if force:  # DST holds another drafter's complete output
            shutil.copytree(outputs["ref_old"], dst, copy_function=os.link)
        wait = _point(kind, out, dst, outputs["convert_s"] * 0.5 ** attempt)
        proc = subprocess.Popen(argv, cwd=tmp_path, env=subprocess_env(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=sigint_delivered)
        stdout, stderr = interrupt(proc, wait)
        if proc.returncode != 0:
            break
    rc = proc.returncode
    where = f"{point} (exit {rc}, run {attempt + 1}): {stderr.strip()!r}"
    assert rc != 0, f"{where}: the conversion finished before the interrupt in {ATTEMPTS} runs"
    if "Fatal Python error: init_import_site" in stderr:  # the interpreter itself, before any line of ours ran
        assert not dst.exists() or digest(dst) == outputs["digest"]["old"], where
        assert sorted(p.name for p in out.iterdir() if p.name != "dst") == [], f"{where}: left behind"
        return
    assert "Traceback" not in stdout + stderr, where
    # -SIGINT: interrupted before Python's handler was installed; 1: click's parser turned it into E-INTERRUPTED
    assert rc in (1, 130, -signal.SIGINT), where
    has = digest(dst) if dst.exists() else None
    old = outputs["digest"]["old"] if force else None
    state = "new" if has == outputs["digest"]["new"] else "old" if has else "absent"
    print(f"OUTCOME {point} exit={rc} dst={state} leftovers={len(list(out.iterdir())) - dst.exists()}")  # with -s
    if rc == 130:
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("interrupted: "), where
        if "nothing was written" in last:
            assert has == old, f"{where}: the message says nothing was written"
        else:
            assert f"{dst} was written" in last, where
            assert has == outputs["digest"]["new"], f"{where}: the message says DST was written"
    elif rc == 1:  # click's parser turned the interrupt into E-INTERRUPTED, before or just after the command
        last = stderr.strip().splitlines()[-1]
        assert "[E-INTERRUPTED]" in last, where
        assert has == (outputs["digest"]["new"] if f"{dst} was written completely" in last else old), where
    else:
        assert has == old, where
    assert sorted(p.name for p in out.iterdir() if p.name != "dst") == [], f"{where}: left behind"


# ------------------------------------------------------------------ what --force may delete

def _convert(*args, cwd: Path, work: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*[str(a) for a in args]), cwd=cwd, env=subprocess_env(work), capture_output=True,
                          text=True, timeout=PROCESS_LIMIT_S)


def test_force_refuses_a_directory_that_holds_no_checkpoint(tmp_path: Path):
    dst = tmp_path / "dst"
    (dst / "sub").mkdir(parents=True)
    (dst / "notes.txt").write_text("mine")
    (dst / "sub" / "more.txt").write_text("mine too")
    proc = _convert("--to", "sglang", "--force", "--no-record", EXAMPLE, dst, cwd=tmp_path, work=tmp_path)
    line = assert_one_line_error(proc, "E-DEST-NOT-CHECKPOINT")
    assert "notes.txt" in line and "sub/" in line
    assert (dst / "notes.txt").read_text() == "mine" and (dst / "sub" / "more.txt").read_text() == "mine too"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "state"]


def test_force_refuses_a_checkpoint_with_files_of_the_user_beside_it(tmp_path: Path):
    dst = tmp_path / "dst"
    assert _convert("--to", "sglang", "--no-record", EXAMPLE, dst, cwd=tmp_path, work=tmp_path).returncode == 0
    (dst / "train.py").write_text("print('mine')")
    proc = _convert("--to", "sglang", "--force", "--no-record", EXAMPLE, dst, cwd=tmp_path, work=tmp_path)
    assert "train.py" in assert_one_line_error(proc, "E-DEST-NOT-CHECKPOINT")
    assert (dst / "train.py").exists()


def test_force_replaces_a_checkpoint_and_an_empty_directory(tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(EXAMPLE, ckpt)
    (ckpt / "tokenizer.json").write_text("{}")  # a checkpoint writer's file: replaced (a README.md is refused)
    proc = _convert("--to", "sglang", "--force", "--no-record", EXAMPLE, ckpt, cwd=tmp_path, work=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (ckpt / "model.safetensors").is_file() and not (ckpt / "tokenizer.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _convert("--to", "sglang", "--force", "--no-record", EXAMPLE, empty, cwd=tmp_path, work=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("dst", [".", "..", "../..", "{cwd}", "{parent}"])
def test_force_onto_the_cwd_or_its_ancestor_is_refused_clearly(tmp_path: Path, dst: str):
    cwd = tmp_path / "a" / "b" / "c"
    shutil.copytree(EXAMPLE, cwd)  # the cwd holds a checkpoint: --force would otherwise replace it
    before = sorted(p.name for p in cwd.iterdir())
    src = tmp_path / "elsewhere"
    shutil.copytree(EXAMPLE, src)
    dst = dst.format(cwd=cwd, parent=cwd.parent)
    proc = _convert("--to", "sglang", "--force", "--no-record", src, dst, cwd=cwd, work=tmp_path)
    assert "E-OS" not in proc.stderr and "busy" not in proc.stderr
    code = re.search(r"\[(E-[A-Z-]+)\]", proc.stderr)
    assert proc.returncode == 1 and code and code.group(1) in ("E-DEST-CWD", "E-DEST-NOT-CHECKPOINT"), proc.stderr
    assert_one_line_error(proc, code.group(1))
    assert sorted(p.name for p in cwd.iterdir()) == before
    assert not list(tmp_path.rglob("*.tmp-*"))


def test_force_onto_the_cwd_names_the_cwd(tmp_path: Path):
    cwd = tmp_path / "ckpt"
    shutil.copytree(EXAMPLE, cwd)
    proc = _convert("--to", "sglang", "--force", "--no-record", EXAMPLE, ".", cwd=cwd,
                    work=tmp_path)
    line = assert_one_line_error(proc, "E-DEST-CWD")
    assert "current directory" in line


def test_force_onto_an_ancestor_of_src_is_refused(tmp_path: Path):
    src = tmp_path / "models" / "src"
    shutil.copytree(EXAMPLE, src)
    proc = _convert("--to", "sglang", "--force", "--no-record", src, tmp_path / "models", cwd=tmp_path, work=tmp_path)
    assert_one_line_error(proc, "E-DEST")
    assert (src / "config.json").is_file()


def test_a_non_empty_dst_without_a_checkpoint_is_not_sent_to_force(tmp_path: Path):
    """The hint is a way out: --force would be refused here too, so it is not suggested as the fix."""
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "notes.txt").write_text("mine")
    proc = _convert("--to", "sglang", "--no-record", EXAMPLE, dst, cwd=tmp_path, work=tmp_path)
    line = assert_one_line_error(proc, "E-DEST")
    assert "notes.txt" in line and "pass --force" not in line
    holds = tmp_path / "holds"
    assert _convert("--to", "sglang", "--no-record", EXAMPLE, holds, cwd=tmp_path, work=tmp_path).returncode == 0
    line = assert_one_line_error(_convert("--to", "sglang", "--no-record", EXAMPLE, holds, cwd=tmp_path,
                                          work=tmp_path), "E-DEST")
    assert "pass --force" in line  # and that hint works:
    assert _convert("--to", "sglang", "--no-record", "--force", EXAMPLE, holds, cwd=tmp_path,
                    work=tmp_path).returncode == 0
