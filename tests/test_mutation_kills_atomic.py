"""The atomic writer's swap, exchange, rollback and dead-temp-dir cleanup, in-process (issue 26).

tests/test_durability_syscalls.py and tests/test_faults.py check these from outside, with strace and killed
processes; mutation testing cannot select a test that reaches the code only through a child process, so the
same behaviour is pinned here in this process: real files in tmp_path, the real CLI (run_cli) or the
`write_directory` call `convert` makes, and faults staged with the filesystem itself (an immutable directory,
a temp dir left by a dead writer, one held by a live one, a second writer filling DST meanwhile). What the
writer did is read back from Python's audit events (os.rename, tempfile.mkdtemp, shutil.rmtree, the ctypes
lookup of renameat2): they observe our calls, they replace nothing.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from conftest import EXAMPLE, run_cli, tree_digest

from eagle3_convert.atomic import json_bytes, write_directory, written_destinations
from eagle3_convert.errors import DestinationError
from eagle3_convert.safetensors_io import InMemoryTensor

WATCHED = {"os.rename", "tempfile.mkdtemp", "shutil.rmtree", "ctypes.dlsym"}
_events: list[tuple[str, tuple]] | None = None


def _record(event: str, args: tuple) -> None:
    if _events is not None and event in WATCHED:
        _events.append((event, args))


sys.addaudithook(_record)  # an audit hook cannot be removed: it records only inside `audited()`


@contextmanager
def audited() -> Iterator[list[tuple[str, tuple]]]:
    global _events
    _events = []
    try:
        yield _events
    finally:
        _events = None


def renames(events: list[tuple[str, tuple]]) -> list[tuple[str, str]]:
    return [(os.fspath(a[0]), os.fspath(a[1])) for e, a in events if e == "os.rename"]


def made_temp_dirs(events: list[tuple[str, tuple]]) -> list[Path]:
    return [Path(a[0]) for e, a in events if e == "tempfile.mkdtemp"]


def removed_trees(events: list[tuple[str, tuple]]) -> list[Path]:
    return [Path(a[0]) for e, a in events if e == "shutil.rmtree"]


def looked_up_renameat2(events: list[tuple[str, tuple]]) -> bool:
    return any(e == "ctypes.dlsym" and a[1] == "renameat2" for e, a in events)


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """chattr +i: no entry of `path` may be added or removed, and `path` itself may not be renamed, whoever asks
    (root included: the tests run as root, where permission bits stop nothing)."""
    subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True, capture_output=True)


def can_make_immutable(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    if done:
        subprocess.run(["chattr", "-i", str(probe)], check=True)
    probe.rmdir()
    return done


needs_chattr = pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root (CAP_LINUX_IMMUTABLE)")


def convert(to: str, dst: Path, *flags: str, src: Path = EXAMPLE):
    return run_cli("--to", to, "--no-record", *flags, src, dst)


def beside(dst: Path) -> list[str]:
    """Everything in DST's parent but DST: temp dirs and old copies a writer left behind."""
    return sorted(p.name for p in dst.parent.iterdir() if p.name != dst.name)


@pytest.fixture
def dst(tmp_path: Path) -> Path:
    """out/dst holding an SGLang conversion of the example."""
    dst = tmp_path / "out" / "dst"
    assert convert("sglang", dst).exit_code == 0
    return dst


@pytest.fixture
def vllm_reference(tmp_path: Path) -> Path:
    ref = tmp_path / "reference" / "vllm"
    assert convert("vllm", ref).exit_code == 0
    return ref


def same_output(a: Path, b: Path) -> bool:
    return all((a / n).read_bytes() == (b / n).read_bytes() for n in ("config.json", "model.safetensors"))


# ------------------------------------------------------------------ --force: one exchange, nothing left beside

def test_force_swaps_the_new_output_in_with_one_exchange_and_removes_the_old(dst: Path, vllm_reference: Path):
    """renameat2(RENAME_EXCHANGE) puts the new output at DST in one step: no rename, no `.old-` dir; the old
    output, now in the temp dir, is removed with it."""
    with audited() as events:
        result = convert("vllm", dst, "--force")
    assert result.exit_code == 0, result.stderr
    assert same_output(dst, vllm_reference)
    assert looked_up_renameat2(events) and renames(events) == []
    [tmp] = made_temp_dirs(events)
    assert tmp.parent == dst.parent and tmp.name.startswith(".dst.tmp-")
    assert tmp in removed_trees(events)
    assert beside(dst) == []


def test_without_renameat2_force_moves_the_old_output_aside_then_removes_it(dst: Path, vllm_reference: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """Where the exchange does not exist (not Linux), the old output is renamed into a `.dst.old-` dir, the new
    one renamed onto DST, and the old one removed."""
    monkeypatch.setattr(sys, "platform", "darwin")
    with audited() as events:
        result = convert("vllm", dst, "--force")
    monkeypatch.undo()
    assert result.exit_code == 0, result.stderr
    assert same_output(dst, vllm_reference)
    assert not looked_up_renameat2(events)
    tmp, old = made_temp_dirs(events)
    assert tmp.name.startswith(".dst.tmp-") and old.name.startswith(".dst.old-") and old.parent == dst.parent
    assert renames(events) == [(str(dst), str(old / "d")), (str(tmp), str(dst))]
    assert old in removed_trees(events)
    assert beside(dst) == []


@needs_chattr
def test_force_onto_a_dst_that_cannot_be_moved_fails_cleanly_and_leaves_it(dst: Path, tmp_path: Path):
    """An immutable DST refuses the exchange (EPERM, read as 'cannot exchange here') and then the move aside:
    a one-line error, DST as it was, neither the temp dir nor the `.old-` dir left behind."""
    assert can_make_immutable(tmp_path)
    before = tree_digest(dst)
    with immutable(dst), audited() as events:
        result = convert("vllm", dst, "--force")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"error: cannot move {dst} aside to replace it: Operation not permitted [E-DEST] — hint: check that it is "
        "writable; retry"), result.stderr
    assert "Traceback" not in result.stderr
    assert looked_up_renameat2(events)
    assert tree_digest(dst) == before and beside(dst) == []


def gguf_writer(name: str, then=None):
    """A `writer` as convert passes for a single-file format: writes one file into the temp dir, then runs
    `then(tmp, dest)` (what happens while this writer works)."""
    def write(tmp: Path, dest: Path, on_progress) -> list[str]:
        (tmp / name).write_bytes(b"GGUF" + name.encode())
        if then is not None:
            then(tmp, dest)
        return [name]
    return write


@needs_chattr
def test_when_the_new_output_cannot_be_renamed_in_the_old_one_is_put_back(dst: Path, tmp_path: Path):
    """The exchange refused, DST moved aside, and then the rename of the new output onto DST fails: the old
    output goes back to DST, the `.old-` dir is removed, and the error says the result could not be moved."""
    assert can_make_immutable(tmp_path)
    before = tree_digest(dst)
    frozen: list[Path] = []

    def freeze(tmp: Path, dest: Path) -> None:
        subprocess.run(["chattr", "+i", str(tmp)], check=True)
        frozen.append(tmp)

    try:
        with audited() as events, pytest.raises(DestinationError) as refused:
            write_directory(dst, {}, {}, {}, src=None, force=True, writer=gguf_writer("x.gguf", freeze))
    finally:
        for tmp in frozen:
            subprocess.run(["chattr", "-i", str(tmp)], check=True)
    assert refused.value.message == f"cannot move the result into {dst}: Operation not permitted"
    assert refused.value.hint == "another process wrote there at the same time, or it is not writable; retry"
    tmp, old = made_temp_dirs(events)
    assert renames(events) == [(str(dst), str(old / "d")), (str(tmp), str(dst)), (str(old / "d"), str(dst))]
    assert tree_digest(dst) == before
    assert beside(dst) == [tmp.name]  # the frozen temp dir only: the `.old-` dir was removed


def test_a_second_writer_filling_dst_meanwhile_wins_and_the_first_is_refused(tmp_path: Path):
    """Two writers of one new DST: the second one, started while the first writes, must not take the first
    one's temp dir for a dead one (it is locked), and writes DST; the first then finds DST filled and is refused,
    its temp dir removed."""
    dst = tmp_path / "out" / "dst"
    seen: dict[str, bool] = {}

    def second_writer(tmp: Path, dest: Path) -> None:
        write_directory(dst, {}, {}, {}, src=None, force=False, writer=gguf_writer("second.gguf"))
        seen["first temp dir kept"] = (tmp / "first.gguf").is_file()

    with pytest.raises(DestinationError) as refused:
        write_directory(dst, {}, {}, {}, src=None, force=False, writer=gguf_writer("first.gguf", second_writer))
    assert seen == {"first temp dir kept": True}
    assert refused.value.message == f"cannot move the result into {dst}: Directory not empty"
    assert sorted(p.name for p in dst.iterdir()) == ["second.gguf"]
    assert beside(dst) == []


def test_a_file_of_the_user_put_in_dst_meanwhile_stops_force(dst: Path):
    """`--force` checked DST, and a file no writer writes appeared there before the swap: the swap refuses with
    the --force refusal (its code, its hint), DST keeps everything, the temp dir is removed."""
    before = tree_digest(dst)

    def user_writes(tmp: Path, dest: Path) -> None:
        (dest / "notes.txt").write_text("mine")

    with pytest.raises(DestinationError) as refused:
        write_directory(dst, {}, {}, {}, src=None, force=True, writer=gguf_writer("x.gguf", user_writes))
    assert refused.value.code == "E-DEST-NOT-CHECKPOINT"
    assert refused.value.message == (f"--force would delete {dst}, which holds files no checkpoint writer writes: "
                                      "notes.txt")
    assert refused.value.hint.startswith(f"move it out of {dst}, or choose another destination; --force replaces")
    assert tree_digest(dst) == before | {"notes.txt": tree_digest(dst)["notes.txt"]}
    assert beside(dst) == []


def test_an_exchange_that_fails_for_another_reason_raises_its_errno(dst: Path):
    """renameat2 failing with anything but 'cannot exchange here' (EINVAL, ENOSYS, EPERM) is an OSError with
    that errno and DST's name; DST is left as it was."""
    before = tree_digest(dst)

    def vanish(tmp: Path, dest: Path) -> None:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()

    with pytest.raises(OSError) as failed:
        write_directory(dst, {}, {}, {}, src=None, force=True, writer=gguf_writer("x.gguf", vanish))
    assert (failed.value.errno, failed.value.strerror, failed.value.filename) == (
        errno.ENOENT, os.strerror(errno.ENOENT), str(dst))
    assert tree_digest(dst) == before and beside(dst) == []


# ------------------------------------------------------------------ what write_directory writes and returns

def test_write_directory_writes_config_weights_and_extra_files_and_returns_their_names(tmp_path: Path,
                                                                                       monkeypatch):
    """config.json is the config as indented JSON with a final newline; the extra files are asked for once the
    weights are written; the names come back in the order written; the destination is remembered as given;
    no file descriptor is left open."""
    monkeypatch.chdir(tmp_path)
    weights_seen: list[bool] = []

    def extra() -> dict[str, bytes]:
        weights_seen.extend(p.is_file() for p in tmp_path.glob(".dst.tmp-*/model.safetensors"))
        return {"eagle3-convert.json": b"{}\n"}

    fds = len(os.listdir("/proc/self/fd"))
    files = write_directory(Path("dst"), {"a": 1, "b": [2]}, {"w": InMemoryTensor("F32", (1,), b"\0\0\x80?")},
                            extra, src=None, force=False)
    assert len(os.listdir("/proc/self/fd")) == fds
    assert files == ["model.safetensors", "config.json", "eagle3-convert.json"]
    assert weights_seen == [True]
    assert (tmp_path / "dst" / "config.json").read_text() == '{\n  "a": 1,\n  "b": [\n    2\n  ]\n}\n'
    assert (tmp_path / "dst" / "eagle3-convert.json").read_bytes() == b"{}\n"
    assert written_destinations()[-1] == Path("dst")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst"]


def test_a_single_file_writer_gets_no_config_json(tmp_path: Path):
    dst = tmp_path / "dst"
    files = write_directory(dst, {"a": 1}, {}, {"extra.txt": b"x"}, src=None, force=False,
                            writer=gguf_writer("m.gguf"))
    assert files == ["m.gguf", "extra.txt"]
    assert sorted(p.name for p in dst.iterdir()) == ["extra.txt", "m.gguf"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_the_output_directory_gets_the_mode_the_umask_allows(tmp_path: Path, umask: int):
    """mkdtemp makes the temp dir private (0700); the output is made as any directory would be."""
    old = os.umask(umask)
    try:
        assert convert("sglang", tmp_path / "dst").exit_code == 0
    finally:
        os.umask(old)
    assert (tmp_path / "dst").stat().st_mode & 0o7777 == 0o777 & ~umask


def test_a_parent_that_cannot_be_made_is_a_one_line_error(tmp_path: Path):
    (tmp_path / "file").write_text("not a directory")
    dst = tmp_path / "file" / "sub" / "dst"
    result = convert("sglang", dst)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"error: cannot write beside {dst}: Not a directory [E-DEST] — hint: check permissions and free space of "
        "the destination's parent"), result.stderr


# ------------------------------------------------------------------ temp dirs of dead writers

def make_temp_dir(parent: Path, name: str, *, files: int = 0, age_s: float = 0) -> Path:
    path = parent / name
    path.mkdir(parents=True)
    for i in range(files):
        (path / f"model-{i}.safetensors").write_bytes(b"partial")
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_the_next_writer_removes_dead_writers_temp_dirs_and_spares_live_ones(tmp_path: Path):
    """Beside DST: a dead writer's temp dir (unlocked, not empty) and an empty one an hour old are removed; an
    empty one just made (a writer between mkdtemp and its lock), one a live writer holds locked, another
    destination's, and a plain file of that name are kept."""
    out = tmp_path / "out"
    make_temp_dir(out, ".dst.tmp-dead", files=2)
    make_temp_dir(out, ".dst.tmp-stale", age_s=3600)
    make_temp_dir(out, ".dst.tmp-fresh", age_s=30)
    live = make_temp_dir(out, ".dst.tmp-live", files=1)
    make_temp_dir(out, ".other.tmp-dead", files=1)
    (out / ".dst.tmp-file").write_text("a file, not a temp dir")
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        result = convert("sglang", out / "dst")
    finally:
        os.close(fd)
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [".dst.tmp-file", ".dst.tmp-fresh", ".dst.tmp-live",
                                                     ".other.tmp-dead", "dst"]
    assert [p.name for p in live.iterdir()] == ["model-0.safetensors"]


def test_an_empty_temp_dir_is_removed_once_a_minute_old(tmp_path: Path):
    out = tmp_path / "out"
    make_temp_dir(out, ".dst.tmp-old", age_s=90)
    make_temp_dir(out, ".dst.tmp-young", age_s=45)
    assert convert("sglang", out / "dst").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [".dst.tmp-young", "dst"]


def test_a_destination_name_with_glob_characters_cleans_only_its_own_temp_dirs(tmp_path: Path):
    """`run[1]`'s temp dirs are `.run[1].tmp-*`: the brackets are not a pattern, so `.run1.tmp-*` (another
    destination's) is kept."""
    out = tmp_path / "out"
    make_temp_dir(out, ".run[1].tmp-dead", files=1)
    make_temp_dir(out, ".run1.tmp-dead", files=1)
    assert convert("sglang", out / "run[1]").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [".run1.tmp-dead", "run[1]"]


def test_a_symlink_named_like_a_temp_dir_is_not_followed(tmp_path: Path):
    """A link `.dst.tmp-x` to a directory elsewhere is no temp dir of ours: neither it nor what it points to is
    touched."""
    out, elsewhere = tmp_path / "out", make_temp_dir(tmp_path, "elsewhere", files=1)
    out.mkdir()
    (out / ".dst.tmp-link").symlink_to(elsewhere)
    assert convert("sglang", out / "dst").exit_code == 0
    assert (out / ".dst.tmp-link").is_symlink() and [p.name for p in elsewhere.iterdir()] == ["model-0.safetensors"]


def test_json_bytes_is_indented_json_with_a_final_newline():
    assert json_bytes({"k": [1, "é"]}) == json.dumps({"k": [1, "é"]}, indent=2).encode() + b"\n"


# ------------------------------------------------------------------ an old copy that cannot be removed

@needs_chattr
@pytest.mark.parametrize("platform", ["linux", "darwin"], ids=["exchange", "two renames"])
def test_an_old_copy_that_cannot_be_removed_does_not_undo_the_swap(dst: Path, vllm_reference: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch, platform: str):
    """The new output is in place once swapped: a file of the old copy that cannot be deleted (immutable) leaves
    that copy behind, beside DST, for the next writer to clear; the conversion still succeeds."""
    assert can_make_immutable(tmp_path)
    subprocess.run(["chattr", "+i", str(dst / "config.json")], check=True)
    monkeypatch.setattr(sys, "platform", platform)
    try:
        result = convert("vllm", dst, "--force")
    finally:
        monkeypatch.undo()
        for stuck in [dst / "config.json", *dst.parent.glob(".dst.*/config.json"),
                      *dst.parent.glob(".dst.*/d/config.json")]:
            subprocess.run(["chattr", "-i", str(stuck)], check=True)
    assert result.exit_code == 0, result.stderr
    assert same_output(dst, vllm_reference)
    [left] = beside(dst)
    old = dst.parent / left / ("d" if platform == "darwin" else "")
    assert left.startswith(".dst.tmp-" if platform == "linux" else ".dst.old-")
    assert sorted(p.name for p in old.iterdir()) == ["config.json"]  # the rest of the old copy is gone


# ------------------------------------------------------------------ destinations refused before anything is written

def last_error(result) -> str:
    assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.splitlines()[-1]


@pytest.mark.parametrize("where", ["the source itself", "inside the source", "around the source"])
def test_a_destination_overlapping_the_source_is_refused(tmp_path: Path, where: str):
    src = tmp_path / "outer" / "src"
    shutil.copytree(EXAMPLE, src)
    dst = {"the source itself": src, "inside the source": src / "out", "around the source": src.parent}[where]
    before = tree_digest(src.parent)
    assert last_error(convert("sglang", dst, "--force", src=src)) == (
        f"error: destination {dst} overlaps the source {src} [E-DEST] — hint: write to a separate directory; the "
        "source is never modified")
    assert tree_digest(src.parent) == before


@pytest.mark.parametrize("inside", [False, True], ids=["is the cwd", "contains the cwd"])
def test_a_destination_holding_the_current_directory_is_refused(tmp_path: Path, monkeypatch, inside: bool):
    dst = tmp_path / "dst"
    cwd = dst / "sub" if inside else dst
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    where = f"contains the current directory {cwd}" if inside else "is the current directory"
    assert last_error(convert("sglang", dst, "--force")) == (
        f"error: destination {dst} {where}; replacing it would leave this shell in a deleted directory [E-DEST-CWD] "
        f"— hint: run from outside it (cd {tmp_path}) and name the directory, or choose another destination")


def test_a_deleted_current_directory_is_no_destination(tmp_path: Path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    result = convert("sglang", tmp_path / "dst")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("kind", ["link to a directory", "dangling link"])
def test_a_destination_that_is_a_link_is_refused(tmp_path: Path, kind: str):
    dst = tmp_path / "dst"
    (tmp_path / "real").mkdir()
    dst.symlink_to(tmp_path / ("real" if kind == "link to a directory" else "nothing"))
    assert last_error(convert("sglang", dst, "--force")) == (
        f"error: destination {dst} exists and is not a directory [E-DEST] — hint: choose a new directory name")
    assert list((tmp_path / "real").iterdir()) == []


def test_a_destination_that_is_a_file_is_refused(tmp_path: Path):
    """(The CLI's argument check refuses a file first; the writer refuses it as well.)"""
    dst = tmp_path / "dst"
    dst.write_text("x")
    with pytest.raises(DestinationError) as refused:
        write_directory(dst, {}, {}, {}, src=None, force=True, writer=gguf_writer("x.gguf"))
    assert (refused.value.message, refused.value.hint) == (f"destination {dst} exists and is not a directory",
                                                           "choose a new directory name")
    assert dst.read_text() == "x" and beside(dst) == []


def test_a_destination_inside_a_file_is_refused(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    dst = tmp_path / "file" / "dst"
    assert last_error(convert("sglang", dst)) == (
        f"error: {tmp_path / 'file'} is not a directory [E-DEST] — hint: choose a destination inside a directory")


def test_without_force_a_checkpoint_in_dst_is_refused_naming_its_files(dst: Path):
    before = tree_digest(dst)
    assert last_error(convert("vllm", dst)) == (
        f"error: destination {dst} is not empty (it holds config.json, eagle3-convert.json, model.safetensors) "
        "[E-DEST] — hint: pass --force to replace those files, or choose a new path")
    assert tree_digest(dst) == before


def test_a_destination_several_new_directories_deep_is_made(tmp_path: Path):
    dst = tmp_path / "a" / "b" / "c" / "dst"
    assert convert("sglang", dst).exit_code == 0
    assert (dst / "config.json").is_file() and beside(dst) == []


def test_a_single_file_writer_reports_its_progress_through_the_callback_given(tmp_path: Path):
    progress: list[int] = []

    def writer(tmp: Path, dest: Path, on_progress) -> list[str]:
        (tmp / "m.gguf").write_bytes(b"GGUF")
        on_progress(4)
        return ["m.gguf"]

    write_directory(tmp_path / "dst", {}, {}, {}, src=None, force=False, on_progress=progress.append, writer=writer)
    assert progress == [4]


def test_the_weights_are_sharded_as_asked_marked_pt_and_their_progress_reported(tmp_path: Path):
    progress: list[int] = []
    tensors = {"w": InMemoryTensor("F32", (2,), b"\0" * 8), "v": InMemoryTensor("F32", (2,), b"\1" * 8)}
    files = write_directory(tmp_path / "dst", {"a": 1}, tensors, {}, src=None, force=False, max_shard_bytes=8,
                            on_progress=progress.append)
    assert files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                     "model.safetensors.index.json", "config.json"]
    assert sum(progress) == 16
    for shard in files[:2]:
        data = (tmp_path / "dst" / shard).read_bytes()
        size = int.from_bytes(data[:8], "little")
        assert json.loads(data[8:8 + size])["__metadata__"] == {"format": "pt"}
