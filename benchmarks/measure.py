"""Running and timing: every command a subprocess, wall time and the kernel's peak RSS, the page
cache evicted or warmed before each, round-robin over the rows; the progress-bar check."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bin_input import write_target, write_torch_bin
from cases import GEN_CHUNK, SIZES, Op, Sample, Size, generate

TIME_BIN = Path("/usr/bin/time")


def run_child(cmd: list[str]) -> Sample:
    """Run `cmd` (stdout to /dev/null), returning its wall time and the kernel's peak RSS for it.

    The RSS comes from GNU time's wait4: a child of this Python process would report our own
    peak too (the kernel keeps the pre-exec image's high-water mark), and numpy alone is 40 MiB.
    """
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        wrapped = [str(TIME_BIN), "-f", "%M", "-o", rss.name, *cmd] if TIME_BIN.is_file() else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        reported = rss.read().strip().splitlines()
        peak = int(reported[-1]) if reported and reported[-1].isdigit() else usage.ru_maxrss
        err.seek(max(0, err.seek(0, os.SEEK_END) - 4096))  # the last lines say why it failed
        return Sample(wall, peak, proc.returncode, err.read().decode(errors="replace"))


def files_under(paths: list[Path]) -> list[Path]:
    return [f for path in paths for f in (sorted(path.rglob("*")) if path.is_dir() else [path]) if f.is_file()]


def evict(paths: list[Path]) -> None:
    """Drop these files from the page cache (POSIX_FADV_DONTNEED after a sync): cold data, warm Python."""
    os.sync()
    for f in files_under(paths):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm(paths: list[Path]) -> None:
    os.sync()
    for f in files_under(paths):
        with open(f, "rb") as fh:
            while fh.read(GEN_CHUNK):
                pass


def cli_entry() -> list[str]:
    """The console script itself (a pyenv shim in front of it adds ~70 ms of bash, not ours to count)."""
    beside = Path(sys.executable).parent / "eagle3-convert"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("eagle3-convert")
    return [found] if found else [sys.executable, "-c", "from eagle3_convert.cli import main; main()"]


def cli_capabilities(cli: list[str]) -> tuple[list[str], set[str]]:
    """Layouts `--to` accepts and the commands the CLI has, read from its own --help."""
    top = subprocess.run([*cli, "--help"], capture_output=True, text=True, check=True).stdout
    commands = set(re.findall(r"^  ([a-z][\w-]*)\s", top.split("Commands:", 1)[-1].split("Layouts", 1)[0], re.M))
    conv = subprocess.run([*cli, "convert", "--help"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"--to \[([^\]]+)\]", conv)
    layouts = m.group(1).split("|") if m else ["speculators", "sglang"]
    return layouts, commands


def warm_bytecode(cli: list[str], work: Path, layouts: list[str], commands: set[str], bin_input: bool = False) -> None:
    """Run each command once on a toy drafter, untimed, so every module's bytecode is cached."""
    toy = work / "warmup"
    shutil.rmtree(toy, ignore_errors=True)
    generate(SIZES["tiny"], toy / "speculators")
    runs = [[*cli, "--help"], [*cli, "inspect", str(toy / "speculators")]]
    if "validate" in commands:
        runs += [[*cli, "validate", str(toy / "speculators")], [*cli, "validate", "--deep", str(toy / "speculators")]]
    # --no-record: a warm-up's record (target x/y) would contradict the .bin step's --target below.
    runs += [[*cli, "--to", layout, "--quiet", "--no-record", "--verifier", "x/y", str(toy / "speculators"),
              str(toy / layout)] for layout in layouts if layout != "speculators"]
    for cmd in runs:
        subprocess.run(cmd, capture_output=True)
    if bin_input:  # the .bin reader's modules too
        shutil.rmtree(toy / "eagle", ignore_errors=True)
        subprocess.run([*cli, "--to", "eagle", "--quiet", "--no-record", "--target",
                        str(write_target(SIZES["tiny"], toy)), str(toy / "speculators"), str(toy / "eagle")],
                       capture_output=True, check=True)
        (toy / "eagle-bin").mkdir()
        shutil.copy(toy / "eagle" / "config.json", toy / "eagle-bin" / "config.json")
        write_torch_bin(toy / "eagle-bin" / "pytorch_model.bin", toy / "eagle")
        subprocess.run([*cli, "inspect", str(toy / "eagle-bin")], capture_output=True)
    shutil.rmtree(toy)


def supports_mla(cli: list[str], scratch: Path) -> bool:
    """Whether this build reads an MLA (DeepSeek/Kimi) drafter: try a tiny one."""
    tiny = Size("mla-probe", 64, 4, 4, None, 128, 512, 128, 8, "x/y", "DeepseekV3ForCausalLM",
                mla={"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
                     "v_head_dim": 8})
    probe = scratch / "mla-probe"
    shutil.rmtree(probe, ignore_errors=True)
    generate(tiny, probe / "generated")
    # As prepare_size makes its home copy: the speculators layout cannot hold an MLA drafter (inspect of the
    # generated copy refuses it, E-ENGINE-UNSUPPORTED, on every build), vLLM's can.
    ok = (subprocess.run([*cli, "--to", "vllm", "--quiet", "--verifier", tiny.verifier, str(probe / "generated"),
                          str(probe / "vllm")], capture_output=True).returncode == 0
          and subprocess.run([*cli, "inspect", str(probe / "vllm")], capture_output=True).returncode == 0)
    shutil.rmtree(probe)
    return ok


def measure(ops: list[Op], runs: int, cold: bool, sources: list[Path]) -> None:
    """Round-robin over the ops so drift (other load, writeback) touches every row alike."""
    live = [op for op in ops if op.skipped is None]
    for r in range(runs):
        for op in live:
            if op.dest is not None:
                shutil.rmtree(op.dest, ignore_errors=True)
            (evict if cold else warm)(sources)
            op.samples.append(run_child(op.cmd))
            if op.dest is not None:
                shutil.rmtree(op.dest, ignore_errors=True)
        print(f"[{ops[0].size}] round {r + 1}/{runs} done", flush=True)


# ------------------------------------------------------------------ progress bars


def check_progress(cli: list[str], src: Path, out: Path, commands: set[str]) -> list[str]:
    """Is a progress bar drawn on a terminal, and absent with --quiet or without one?"""
    if not shutil.which("script"):
        return ["`script` (util-linux) is missing: progress under a pseudo-terminal not checked"]
    dest = out / "progress"
    convert = [*cli, "--to", "sglang", str(src), str(dest)]
    sized = "stty cols 120 rows 40; "  # a terminal's size: `script`'s pty here is 0x0
    cases = [("convert, terminal 120x40", convert, sized),
             ("convert, terminal 120x40, --quiet", [*convert, "--quiet"], sized),
             ("convert, terminal 0x0 (as `script` gives here)", convert, ""),
             ("convert, pipe (no TTY)", convert, None)]
    if "validate" in commands:
        deep = [*cli, "validate", "--deep", str(src)]
        cases += [("validate --deep, terminal 120x40", deep, sized), ("validate --deep, pipe (no TTY)", deep, None)]
    lines = []
    for label, cmd, tty in cases:
        shutil.rmtree(dest, ignore_errors=True)
        if tty is None:
            done = subprocess.run(cmd, capture_output=True)
            text = done.stderr.decode(errors="replace")
        else:
            done = subprocess.run(["script", "-qfec", tty + shlex.join(cmd), "/dev/null"], capture_output=True)
            text = done.stdout.decode(errors="replace")
        bar = re.search(r"\d+%\|", text) is not None
        redraws = len(re.findall(r"\r(?!\n)", text))
        said = [line for line in text.replace("\r", "\n").splitlines() if line.startswith("error:")]
        lines.append(f"{label}: exit {done.returncode}, bar {'drawn' if bar else 'absent'}"
                     + (f" ({redraws} redraws)" if bar else "") + (f"; {said[-1][:200]}" if said else ""))
    shutil.rmtree(dest, ignore_errors=True)
    return lines
