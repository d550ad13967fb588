"""Every command over the whole hostile corpus (tests/hostile.py): refused with one line, nothing
executed, nothing left behind, the source untouched.

The bulk runs the real CLI in-process (click's runner; an exception escaping the command
would fail the test, and run_guarded's catch-all answers exit 3, which fails it too). A
sample of the corpus runs every command as a real `python -m eagle3_convert` process, to
prove no traceback reaches a user's terminal and nothing hangs or crashes a real process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import click
import pytest
from click.testing import CliRunner

from eagle3_convert.cli import main
from eagle3_convert.converters.registry import layouts
from eagle3_convert.names import ENGINES
from hostile import DEAD_ENDPOINT, EXAMPLE, MARKER_PREFIX, HostileCase, copy_example, hostile_cases, isolated_env, \
    marker_path, mixed_bin_and_safetensors, subprocess_env

CASES = hostile_cases()
CASE_BY_NAME = {case.name: case for case in CASES}
ERROR_LINE = re.compile(r"^error: .+ \[(E-[A-Z0-9-]+)\] — hint: .+$")
REGISTRY_FILES = re.compile(r"^state/registry\.db(-wal|-shm|-journal)?$")
HANG_LIMIT_S = 120  # a guard against a hang (a FIFO opened for reading), not a speed assertion


@dataclass(frozen=True)
class Command:
    """One CLI command as the corpus runs it: `argv(src, work)`; `needs` is its click path."""

    name: str
    needs: tuple[str, ...]
    argv: Callable[[Path, Path], list[str]]
    checks_source_codes: bool  # answers with the case's own code (it reads SRC as convert does)


_TARGET_GGUF: list[Path] = []


def target_gguf() -> Path:
    """The example's target as a GGUF (8 layers, width 64, 512 tokens), written once: `--to gguf` needs one."""
    if not _TARGET_GGUF:
        import tempfile

        from gguf_target import write_target_gguf

        _TARGET_GGUF.append(write_target_gguf(Path(tempfile.mkdtemp(prefix="hostile-target-")) / "target.gguf"))
    return _TARGET_GGUF[0]


def _convert(layout: str) -> Command:
    def argv(src: Path, work: Path) -> list[str]:
        extra = ["--target-gguf", str(target_gguf())] if layout == "gguf" else []
        return ["--to", layout, str(src), str(work / "out" / "dst"), "--target", str(work / "target"), *extra]

    return Command(f"convert-{layout}", ("convert",), argv, True)


# Listed explicitly: a command missing from the CLI is skipped with a reason, never silently dropped.
COMMANDS = [
    # (nemo is read only; dflash holds block-diffusion drafters, not the EAGLE-3 example the corpus mangles)
    *(_convert(name) for name, layout in sorted(layouts().items()) if layout.writes and "eagle3" in layout.kinds),
    Command("inspect", ("inspect",), lambda src, work: ["inspect", str(src)], True),
    Command("validate", ("validate",), lambda src, work: ["validate", str(src)], False),  # may sum up findings
    Command("registry-add", ("registry", "add"),
            lambda src, work: ["registry", "add", str(src), "--target", str(work / "target")], True),
    Command("publish-dry-run", ("publish",),
            lambda src, work: ["publish", str(src), "hostile-org/drafter", "--dry-run", "--endpoint", DEAD_ENDPOINT],
            False),
]
COMMAND_BY_NAME = {command.name: command for command in COMMANDS}


def implemented(command: Command) -> bool:
    group: click.Command | None = main
    for part in command.needs:
        group = group.commands.get(part) if isinstance(group, click.Group) else None
    return group is not None


def require_command(command: Command) -> None:
    """Every command the corpus is run through exists: one that went missing fails here, it is not skipped."""
    assert implemented(command), f"no command eagle3-convert {' '.join(command.needs)}"


# ------------------------------------------------------------------ the work area

def prepare_work(work: Path, build: Callable[[Path], None]) -> Path:
    """work/src (the checkpoint), work/out (where DSTs go), work/state (HOME), work/target (a target config)."""
    for name in ("out", "target"):
        (work / name).mkdir(parents=True)
    isolated_env(work)  # creates work/state
    (work / "target" / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 8, "hidden_size": 64,
        "vocab_size": 512, "intermediate_size": 128, "num_attention_heads": 4}))
    build(work / "src")
    return work / "src"


def _file_digest(path: Path, st: os.stat_result) -> str:
    if st.st_size <= 64 * 1024 * 1024:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    # The 3 GB sparse config: size, allocated blocks and mtime say whether anything wrote to it.
    with open(path, "rb") as f:
        head = f.read(1 << 20)
        f.seek(-(1 << 20), os.SEEK_END)
        tail = f.read()
    return f"{st.st_size}:{st.st_blocks}:{st.st_mtime_ns}:{hashlib.sha256(head + tail).hexdigest()}"


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root` (never following links, never opening FIFOs) with what it holds."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link:" + os.readlink(path)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = f"dir:{stat.S_IMODE(st.st_mode):o}"
            elif stat.S_ISREG(st.st_mode):
                out[rel] = f"file:{stat.S_IMODE(st.st_mode):o}:" + _file_digest(path, st)
            else:
                out[rel] = f"special:{stat.S_IFMT(st.st_mode)}"
    return out


def registry_rows(db: Path) -> int:
    if not db.is_file():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                   for t in ("drafters", "locations", "lineage") if t in tables)


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str


def assert_refused_cleanly(case: HostileCase, command: Command, work: Path, before: dict[str, str],
                           result: Outcome) -> None:
    """The contract for every (command x hostile input)."""
    where = f"{command.name} on {case.name} ({case.breaks})"
    assert "Traceback" not in result.stdout + result.stderr, f"{where}: traceback\n{result.stderr}"
    assert result.exit_code in (1, 2), f"{where}: exit {result.exit_code}\n{result.stderr}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"{where}: stderr must be one line, got {len(lines)}:\n{result.stderr}"
    match = ERROR_LINE.match(lines[0])
    assert match, f"{where}: not 'error: ... [CODE] — hint: ...': {lines[0]!r}"
    if command.checks_source_codes:
        assert match.group(1) in case.codes, f"{where}: refused with {match.group(1)}, expected {sorted(case.codes)}"
    after = snapshot(work)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    unexpected = {k for k in changed if not REGISTRY_FILES.match(k)}
    assert not unexpected, f"{where}: files created, changed or removed: {sorted(unexpected)}"
    assert registry_rows(work / "state" / "registry.db") == 0, f"{where}: a refused input was recorded"
    assert not list(work.rglob(f"{MARKER_PREFIX}*")), f"{where}: a pickle payload ran"
    assert not (work / "out" / "dst").exists()


# ------------------------------------------------------------------ in-process bulk

class Hung(BaseException):
    """Raised by the alarm: a BaseException so run_guarded's catch-all cannot turn it into an exit code."""


@pytest.fixture
def hang_guard():
    def alarm(signum, frame):
        raise Hung(f"the command ran past {HANG_LIMIT_S} s (blocked on a FIFO or a memory bomb?)")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_LIMIT_S)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def run_in_process(argv: list[str], work: Path, monkeypatch: pytest.MonkeyPatch) -> Outcome:
    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    for key, value in isolated_env(work).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(work)  # a stray relative write would land in the snapshot
    result = CliRunner().invoke(main, argv, catch_exceptions=False)
    return Outcome(result.exit_code, result.stdout, result.stderr)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_command_accepts_the_valid_base(command: Command, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Control: the invocation the corpus uses works on the untouched example, so every refusal
    below is the hostile input's doing, not a wrong option."""
    require_command(command)
    src = prepare_work(tmp_path, copy_example)
    result = run_in_process(command.argv(src, tmp_path), tmp_path, monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_hostile_input_is_refused(case: HostileCase, command: Command, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch, hang_guard):
    require_command(command)
    src = prepare_work(tmp_path, case.build)
    before = snapshot(tmp_path)
    result = run_in_process(command.argv(src, tmp_path), tmp_path, monkeypatch)
    assert_refused_cleanly(case, command, tmp_path, before, result)


@contextmanager
def memory_guard(extra: int = 2 << 30):
    """A memory bomb ends in MemoryError (which the CLI reports as an internal error) instead of swapping the
    machine: the process' data segment may grow by `extra` bytes inside the block."""
    used_kib = int(re.search(r"^VmData:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M).group(1))
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = used_kib * 1024 + extra
    resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


CONFIG_CASES = [case for case in CASES if case.name.startswith("config-")]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", CONFIG_CASES, ids=lambda c: c.name)
def test_every_engine_reader_refuses_hostile_configs(case: HostileCase, engine: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, hang_guard):
    """`validate --engine E` replays E's reader on the config, including the engines the default validate does
    not judge (llama.cpp, mlx-vlm, LMDeploy): a hostile value refuses there as cleanly as anywhere. mlx-vlm's
    reader once built a parameter set for num_hidden_layers 10**9 (21 GB, then killed)."""
    src = prepare_work(tmp_path, case.build)
    before = snapshot(tmp_path)
    with memory_guard():
        result = run_in_process(["validate", str(src), "--engine", engine], tmp_path, monkeypatch)
    where = f"validate --engine {engine} on {case.name} ({case.breaks})"
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "E-INTERNAL" not in output, f"{where}:\n{output}"
    assert result.exit_code == 1, f"{where}: exit {result.exit_code}\n{output}"
    assert set(re.findall(r"\bE-[A-Z0-9-]+", output)) & case.codes, f"{where}: none of {sorted(case.codes)}\n{output}"
    after = snapshot(tmp_path)
    assert {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)
            and not REGISTRY_FILES.match(k)} == set(), where


# ------------------------------------------------------------------ real processes

# One case from every region of the corpus, including those that could hang or run code.
SUBPROCESS_SAMPLE = ("trunc-data-mid", "hdrlen-max", "header-deep-nesting", "offsets-overlap", "index-dotdot",
                     "weights-fifo", "config-huge", "config-verifier-name-object", "bin-exec-system",
                     "bin-exec-nested", "bin-overlapping-storages", "mixed-corrupt-st-and-pickle")
SUBPROCESS_COMMANDS = ("convert-sglang", "inspect", "validate", "registry-add", "publish-dry-run")


def run_subprocess(argv: list[str], work: Path) -> Outcome:
    proc = subprocess.run([sys.executable, "-m", "eagle3_convert", *argv], cwd=work, env=subprocess_env(work),
                          capture_output=True, text=True, timeout=HANG_LIMIT_S)
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def subprocess_runs(tmp_path_factory) -> dict[tuple[str, str], tuple[Path, dict[str, str], Outcome]]:
    """Every sampled (case, command) run as a real process, two at a time (CI has 2 cores)."""
    jobs = []
    for case_name in SUBPROCESS_SAMPLE:
        for command_name in SUBPROCESS_COMMANDS:
            command = COMMAND_BY_NAME[command_name]
            require_command(command)
            work = tmp_path_factory.mktemp(f"{case_name}-{command_name}")
            src = prepare_work(work, CASE_BY_NAME[case_name].build)
            jobs.append(((case_name, command_name), work, snapshot(work), command.argv(src, work)))
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        outcomes = list(pool.map(lambda job: run_subprocess(job[3], job[1]), jobs))
    return {key: (work, before, outcome) for (key, work, before, _), outcome in zip(jobs, outcomes)}


@pytest.mark.parametrize("command_name", SUBPROCESS_COMMANDS)
@pytest.mark.parametrize("case_name", SUBPROCESS_SAMPLE)
def test_real_process_refuses_hostile_input(case_name: str, command_name: str, subprocess_runs):
    command = COMMAND_BY_NAME[command_name]
    require_command(command)
    work, before, outcome = subprocess_runs[(case_name, command_name)]
    assert_refused_cleanly(CASE_BY_NAME[case_name], command, work, before, outcome)


# ------------------------------------------------------------------ the pickle is live, and never runs

def test_pickle_payloads_are_live_exploits(tmp_path: Path):
    """The corpus' pickles really run code when unpickled unsafely: refusing them proves something."""
    torch = pytest.importorskip("torch")
    live = [case for case in CASES if case.pickle_payload]
    assert len(live) >= 4
    for case in live:
        src = tmp_path / case.name
        case.build(src)
        (weights,) = src.glob("pytorch_model*.bin")
        try:
            torch.load(weights, weights_only=False)  # what a careless loader does
        except Exception:
            pass  # the bare pickle fails torch's magic-number check, after unpickling: the payload ran first
        assert marker_path(src).exists(), f"{case.name}: the payload did not run under weights_only=False"
        marker_path(src).unlink()
        with pytest.raises(Exception, match="(?i)weights_only|unpickl|unsupported global"):
            torch.load(weights, weights_only=True)
        assert not marker_path(src).exists()


@pytest.mark.parametrize("name, blocked", [("bin-exec-open", "io.open"), ("bin-exec-system", "posix.system")])
def test_weights_only_names_the_code_it_refused(name: str, blocked: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch):
    """The refusal comes from weights_only unpickling (not a damaged zip): it names the call it blocked."""
    pytest.importorskip("torch")
    src = prepare_work(tmp_path, CASE_BY_NAME[name].build)
    result = run_in_process(["inspect", str(src)], tmp_path, monkeypatch)
    assert result.exit_code == 1 and "[E-BIN-UNSAFE]" in result.stderr
    assert f"its pickle calls {blocked}" in result.stderr
    assert "\x1b" not in result.stderr  # torch's terminal escapes are not passed on
    assert not marker_path(src).exists()


def test_pickle_beside_valid_safetensors_is_never_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A code-running .bin next to good safetensors: engines load the safetensors, so converting them is
    right; the pickle is ignored (and said so), never unpickled."""
    src = prepare_work(tmp_path, mixed_bin_and_safetensors)
    before_src = {k: v for k, v in snapshot(tmp_path).items() if k.startswith("src")}
    result = run_in_process(["--to", "sglang", str(src), str(tmp_path / "out" / "dst")], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert "pytorch_model.bin" in result.stdout + result.stderr  # the note that it was ignored
    assert not marker_path(src).exists()
    assert {k: v for k, v in snapshot(tmp_path).items() if k.startswith("src")} == before_src
    assert not list((tmp_path / "out" / "dst").glob("*.bin"))


def test_hf_cache_snapshot_symlinks_are_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The symlink refusal must not refuse the Hugging Face cache, whose snapshots link into ../../blobs."""
    repo = tmp_path / "hf" / "models--org--drafter"
    snap = repo / "snapshots" / ("0" * 40)
    (repo / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        blob = repo / "blobs" / hashlib.sha256(name.encode()).hexdigest()
        blob.write_bytes((EXAMPLE / name).read_bytes())
        (snap / name).symlink_to(os.path.relpath(blob, snap))
    result = run_in_process(["inspect", str(snap)], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.stderr
    # ...while a blob of ANOTHER repo is still outside.
    other = tmp_path / "hf" / "models--evil--x" / "blobs" / "w"
    other.parent.mkdir(parents=True)
    os.replace(repo / "blobs" / hashlib.sha256(b"model.safetensors").hexdigest(), other)
    (snap / "model.safetensors").unlink()
    (snap / "model.safetensors").symlink_to(os.path.relpath(other, snap))
    result = run_in_process(["inspect", str(snap)], tmp_path, monkeypatch)
    assert result.exit_code == 1 and "[E-FILE-PATH]" in result.stderr
