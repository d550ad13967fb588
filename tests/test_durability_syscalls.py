"""What the atomic writer asks of the kernel, watched from outside the process (issue 26, Deliver 1).

A real `python -m eagle3_convert` runs under strace, which logs each fsync and rename the process (and its
threads) makes, with the path behind each file descriptor (`-y`). No helper of ours is called: a writer that
skipped a step, or did it out of order, shows in the log whatever its functions return.

A conversion is durable and atomic when, in this order:
1. every file DST ends up holding was fsynced inside the writer's temp dir (its bytes are on disk),
2. the temp dir itself was fsynced (its entries are),
3. the temp dir was renamed onto DST in ONE call (under --force: renameat2 RENAME_EXCHANGE, so that at every
   instant DST is the old output or the new one; two renames leave an instant with no DST),
4. DST's parent was fsynced (the rename is).

strace is a system tool: where it is missing, these tests install Debian's (as the PostgreSQL tier does its server)
and fail if they cannot: a durability check that skips where it cannot look proves nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import peer_venv
import pytest

from builders import DrafterSpec, build_drafter
from gguf_target import write_target_gguf
from hostile import subprocess_env

TRACED = "fsync,fdatasync,rename,renameat,renameat2"
CALL = re.compile(r"^(?P<pid>\d+)\s+(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+)")
UNFINISHED = re.compile(r"^(?P<pid>\d+)\s+(?P<name>\w+)\((?P<args>.*) <unfinished \.\.\.>$")
RESUMED = re.compile(r"^(?P<pid>\d+)\s+<\.\.\. (?P<name>\w+) resumed>.*\)\s+=\s+(?P<ret>-?\d+)")
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
FD_PATH = re.compile(r"^-?\d+<(.*)>$")


@dataclass(frozen=True)
class Call:
    name: str
    args: str
    ret: int

    def fsynced(self) -> str | None:
        """The path an fsync/fdatasync that succeeded was made on."""
        if self.name not in ("fsync", "fdatasync") or self.ret != 0:
            return None
        match = FD_PATH.match(self.args.strip())
        return match.group(1) if match else None

    def renamed(self) -> tuple[str, str] | None:
        if not self.name.startswith("rename"):
            return None
        paths = QUOTED.findall(self.args)
        return (paths[0], paths[1]) if len(paths) == 2 else None


def strace() -> str:
    # these tests watch the writer's fsync and rename calls from outside the process
    peer_venv.debian_package("durability tests (strace)", "strace", lambda: shutil.which("strace") is not None)
    path = shutil.which("strace")
    probe = subprocess.run([path, "-o", "/dev/null", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.fail(f"strace cannot trace here (ptrace not permitted?): {probe.stderr.strip()}")
    return path


def traced_convert(work: Path, *args: str) -> list[Call]:
    """Run the CLI under strace; the successful conversion's fsync/rename calls, in the order they were made."""
    log = work / "strace.log"
    argv = [strace(), "-f", "-qq", "-y", "-e", f"trace={TRACED}", "-e", "signal=none", "-o", str(log),
            sys.executable, "-m", "eagle3_convert", *args, "--quiet"]
    proc = subprocess.run(argv, cwd=work, env=subprocess_env(work), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    calls: list[Call] = []
    pending: dict[str, tuple[int, str, str]] = {}  # pid -> (index, name, args) of a call another thread cut
    for line in log.read_text().splitlines():
        if match := CALL.match(line):
            calls.append(Call(match["name"], match["args"], int(match["ret"])))
        elif match := UNFINISHED.match(line):
            pending[match["pid"]] = (len(calls), match["name"], match["args"])
            calls.append(Call(match["name"], match["args"], -1))  # placed where it began; result below
        elif (match := RESUMED.match(line)) and match["pid"] in pending:
            index, name, call_args = pending.pop(match["pid"])
            calls[index] = Call(name, call_args, int(match["ret"]))
    return calls


def the_swap(calls: list[Call], dst: Path) -> tuple[int, Call, Path]:
    """The one rename that put a temp dir at DST: its index, the call, the temp dir."""
    onto = [(i, c) for i, c in enumerate(calls) if c.renamed() and c.renamed()[1] == str(dst) and c.ret == 0]
    assert len(onto) == 1, f"expected one rename onto {dst}, got {onto}"
    index, call = onto[0]
    tmp = Path(call.renamed()[0])
    assert tmp.parent == dst.parent and tmp.name.startswith(f".{dst.name}.tmp-"), call
    return index, call, tmp


def assert_durable(calls: list[Call], dst: Path) -> Call:
    swap_at, swap, tmp = the_swap(calls, dst)
    synced = [(i, c.fsynced()) for i, c in enumerate(calls) if c.fsynced()]
    written = sorted(p.name for p in dst.iterdir())
    assert written, f"{dst} is empty"
    file_syncs = {}
    for name in written:
        at = [i for i, path in synced if path == str(tmp / name) and i < swap_at]
        assert at, f"{name} was never fsynced in {tmp.name} before the swap; fsyncs: {[p for _, p in synced]}"
        file_syncs[name] = max(at)
    dir_syncs = [i for i, path in synced if path == str(tmp) and max(file_syncs.values()) < i < swap_at]
    assert dir_syncs, f"the temp dir {tmp.name} was not fsynced after its files and before the swap"
    assert [i for i, path in synced if path == str(dst.parent) and i > swap_at], \
        f"{dst.parent} (the rename's directory) was not fsynced after the swap"
    return swap


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two drafters that differ in every tensor: `new` is converted, `old` is what DST holds before --force; and
    the target's GGUF that `--to gguf` copies the tokenizer from."""
    root = tmp_path_factory.mktemp("durability")
    spec = DrafterSpec()
    return {"new": build_drafter(root / "new", "speculators", spec.with_(seed=1)),
            "old": build_drafter(root / "old", "speculators", spec.with_(seed=2)),
            "target_gguf": write_target_gguf(root / "target.gguf", layers=spec.target_layers, hidden=spec.ht,
                                             vocab=spec.vocab_size)}


def to_args(to: str, sources: dict[str, Path]) -> tuple[str, ...]:
    return ("--to", to, *(("--target-gguf", str(sources["target_gguf"])) if to == "gguf" else ()))


def drafter_id(dst: Path) -> str:
    return json.loads((dst / "eagle3-convert.json").read_text())["drafter_id"]


# (layout converted to, extra arguments): one safetensors file, shards with their index, and GGUF's own writer
OUTPUTS = [("sglang", ()), ("vllm", ("--max-shard-size", "20KB")), ("gguf", ())]


@pytest.mark.parametrize("to, extra", OUTPUTS, ids=[o[0] + ("-sharded" if o[1] else "") for o in OUTPUTS])
def test_every_file_the_temp_dir_and_the_parent_are_fsynced_around_one_rename(sources, tmp_path: Path, to: str,
                                                                                extra: tuple[str, ...]):
    dst = tmp_path / "out" / "dst"
    calls = traced_convert(tmp_path, *to_args(to, sources), str(sources["new"]), str(dst), *extra)
    swap = assert_durable(calls, dst.resolve())
    if extra:
        assert len(list(dst.glob("model-*.safetensors"))) > 1, "--max-shard-size wrote one file: nothing sharded"
    assert swap.name in ("rename", "renameat", "renameat2") and "RENAME_EXCHANGE" not in swap.args


@pytest.mark.parametrize("to", ["sglang", "gguf"])
def test_force_swaps_in_one_atomic_exchange(sources, tmp_path: Path, to: str):
    dst = (tmp_path / "out" / "dst")
    first = subprocess.run([sys.executable, "-m", "eagle3_convert", *to_args(to, sources), str(sources["old"]),
                            str(dst), "--quiet"], cwd=tmp_path, env=subprocess_env(tmp_path), capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    old = {p.name: p.read_bytes() for p in dst.iterdir()}

    calls = traced_convert(tmp_path, *to_args(to, sources), str(sources["new"]), str(dst), "--force")
    swap = assert_durable(calls, dst.resolve())
    assert swap.name == "renameat2" and "RENAME_EXCHANGE" in swap.args, \
        f"--force replaced DST with {swap.name}({swap.args}), not one atomic exchange"
    # No second rename moved the old output aside (the non-atomic fallback): DST was never absent.
    aside = [c for c in calls if c.renamed() and (c.renamed()[0] == str(dst.resolve()) or ".dst.old-" in c.args)]
    assert not aside, aside
    new = {p.name: p.read_bytes() for p in dst.iterdir()}
    assert new != old and new.keys() == old.keys()
    if to == "sglang":
        assert drafter_id(dst) != json.loads(old["eagle3-convert.json"])["drafter_id"]
    assert sorted(p.name for p in dst.parent.iterdir()) == ["dst"], "the exchanged-out old output was left"
