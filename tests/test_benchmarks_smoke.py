"""The benchmark script runs end to end on a toy drafter and reports a table (no timing is asserted)."""

from __future__ import annotations

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
    """Issue 24: benchmarks/verify.py builds its target and drafter, times `verify` and prints its row."""
    pytest.importorskip("transformers")
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "verify.py"), "--size", "tiny", "--prompts", "2",
         "--max-new-tokens", "4", "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [row] = [line for line in done.stdout.splitlines() if line.startswith("| tiny-shaped, 8/8 layers | cpu |")]
    cells = [c.strip() for c in row.split("|")]
    assert cells[3] == "2 × 4" and float(cells[5]) > 0 and float(cells[6]) > 0  # wall seconds, peak RSS MiB
    assert int(cells[7]) == 8 and float(cells[8]) > 0 and float(cells[9]) >= 1.0  # tokens, tokens/s, accepted
    assert not (tmp_path / "work").exists()  # removed without --keep
