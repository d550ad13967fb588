"""The benchmark script runs end to end on a toy drafter and reports a table (no timing is asserted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_benchmark_runs_on_tiny_size_and_cleans_up(tmp_path: Path) -> None:
    work, out = tmp_path / "work", tmp_path / "RESULTS.md"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--sizes", "tiny", "--runs", "1",
         "--layouts", "speculators,sglang", "--no-progress-check", "--work", str(work), "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[2].strip(): line for line in done.stdout.splitlines() if line.startswith("| tiny |")}
    for name in ("cp -r", "cat weights > /dev/null", "convert speculators -> sglang", "convert sglang -> speculators",
                 "inspect"):
        cells = [c.strip() for c in rows[name].split("|")]
        assert float(cells[3]) > 0 and float(cells[5]) > 0, rows[name]  # wall seconds, peak RSS MiB
    assert "exit " not in rows["convert speculators -> sglang"]  # the conversion itself succeeded
    bin_rows = {line.split("|")[2].strip(): line for line in done.stdout.splitlines()
                if line.startswith("| tiny .bin |")}
    for name in ("cp -r", "convert eagle .bin -> speculators", "convert eagle .bin -> sglang", "inspect"):
        cells = [c.strip() for c in bin_rows[name].split("|")]
        assert float(cells[3]) > 0 and "exit " not in cells[8], bin_rows[name]  # the original-EAGLE .bin input ran
    imports = [line for line in done.stdout.splitlines() if line.startswith("imports: tiny: ")]
    assert len(imports) == 3 and all("torch not imported" in line for line in imports), imports
    report = out.read_text()
    assert "## Machine" in report and "| tiny | convert speculators -> sglang |" in report
    # Generated drafters and the private registry are removed without --keep.
    assert not any(work.rglob("*.safetensors")) and not any(work.glob("registry.db*"))


def test_benchmark_times_to_gguf_against_a_target_gguf(tmp_path: Path) -> None:
    """Issue 14: `--to gguf` rows, with the target GGUF the benchmark writes (tests/gguf_target.py)."""
    pytest.importorskip("gguf")
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--sizes", "tiny", "--runs", "1", "--inputs",
         "safetensors", "--layouts", "speculators,gguf", "--no-progress-check", "--work", str(tmp_path / "work"),
         "--out", "-"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[2].strip(): line for line in done.stdout.splitlines() if line.startswith("| tiny |")}
    for name in ("convert speculators -> gguf", "convert gguf -> speculators"):
        cells = [c.strip() for c in rows[name].split("|")]
        assert float(cells[3]) > 0 and 0 < float(cells[5]) < 100, rows[name]  # wall s; peak RSS under 100 MiB
        assert "exit " not in cells[8] and "refused" not in cells[8], rows[name]  # it converted


def test_benchmark_never_writes_the_tracked_results_by_default(tmp_path: Path) -> None:
    tracked = REPO / "benchmarks" / "RESULTS.md"
    before = tracked.read_bytes()
    work = tmp_path / "work"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--sizes", "tiny", "--runs", "1",
         "--layouts", "speculators,sglang", "--no-progress-check", "--work", str(work)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| tiny | convert speculators -> sglang |" in (work / "RESULTS.md").read_text()
    assert tracked.read_bytes() == before


def test_the_verify_benchmark_runs_on_a_toy_target(tmp_path: Path) -> None:
    """Issues 24 and 36: benchmarks/verify.py builds its target and drafter, times plain greedy generation and verify's
    decoding of the same tokens in one process, and prints their ratio; --agree makes every draft accepted."""
    pytest.importorskip("transformers")
    for agree, length in (((), 1.0), (("--agree",), 4.0)):
        done = subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "verify.py"), "--size", "tiny", "--prompts", "2",
             "--max-new-tokens", "8", "--work", str(tmp_path / "work"), *agree], capture_output=True, text=True,
            timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stderr
        [row] = [line for line in done.stdout.splitlines() if line.startswith("| tiny-shaped, 8/8 layers")]
        cells = [c.strip() for c in row.split("|")]
        assert cells[2] == "1" and cells[3] == "2 × 8" and cells[4] == "3"  # the thread rule: 1 for a toy target
        greedy, verify, ratio = float(cells[5]), float(cells[6]), float(cells[7])
        rounding = 0.005 * (1 + ratio) / greedy + 0.005  # the cells are rounded to hundredths
        assert greedy > 0 and verify > 0 and abs(ratio - verify / greedy) <= rounding, row
        assert float(cells[8]) == length  # random weights accept nothing; --agree, everything
        verify_forwards, greedy_forwards = map(int, cells[10].split(" / "))
        # one greedy forward a token; verify: the prompt's, then a round a token, or two rounds (4, then 3 to the limit)
        assert greedy_forwards == 16 and verify_forwards == (16 if length == 1 else 2 * 3)
        assert float(cells[11]) > 0 and cells[12].endswith("%")  # a verify forward over a greedy one; the drafter's share
        assert not (tmp_path / "work").exists()  # removed without --keep
