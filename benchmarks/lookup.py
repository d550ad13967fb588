"""What finding a drafter's record by its weights costs (issue 33): `validate` of the 8B drafter with an empty
registry against `validate` with a registry that holds its record (found by fingerprint.weights_key, no sidecar
beside the copy, another path than the one recorded), in one run, alternating, as a ratio. Also the key alone
(in process: the headers read, the 512-byte samples), and `cp` of the weights for scale.

    python benchmarks/lookup.py [--size 8b] [--runs 7] [--work DIR]

The drafter is generated once (random bf16, cases.generate) and recorded with `registry add` (which reads every
byte, once); the page cache is warm for every timed run (the lookup reads a few hundred bytes a tensor).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cases import DEFAULT_WORK, SIZES, generate
from measure import cli_entry, run_child


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="8b", choices=sorted(SIZES))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    args = parser.parse_args()
    size = SIZES[args.size]
    recorded = args.work / f"lookup-{size.name}" / "recorded"
    if not (recorded / "model.safetensors").is_file():
        generate(size, recorded)
    cli = cli_entry()
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        scratch = Path(scratch)
        copy = scratch / "an-ordinary-copy"  # no sidecar, a path the registry never saw
        copy.mkdir()
        for name in ("config.json", "model.safetensors"):
            shutil.copyfile(recorded / name, copy / name)
        registry, empty = scratch / "registry.db", scratch / "empty" / "registry.db"
        subprocess.run([*cli, "registry", "add", str(recorded), "--registry", str(registry)], check=True,
                       stdout=subprocess.DEVNULL)
        found = subprocess.run([*cli, "validate", str(copy), "--registry", str(registry), "--json"],
                               capture_output=True, text=True)
        assert '"E-' not in found.stdout, found.stdout  # the record agrees with the copy: found, no finding

        rows = {"validate, no registry": [*cli, "validate", str(copy), "--registry", str(empty)],
                "validate, record found by weights": [*cli, "validate", str(copy), "--registry", str(registry)],
                "cp model.safetensors": ["cp", str(copy / "model.safetensors"), str(scratch / "cp-copy")]}
        walls: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):  # round-robin: the machine's load falls on every row alike
            for name, cmd in rows.items():
                sample = run_child(cmd)
                if sample.rc not in (0, 1):
                    raise SystemExit(f"{name} failed: {sample.stderr_tail}")
                walls[name].append(sample.wall)
        key_ms = key_in_process(copy, args.runs)

    base = statistics.median(walls["validate, no registry"])
    print(f"{size.name} drafter, {(recorded / 'model.safetensors').stat().st_size / 2**30:.2f} GiB, "
          f"{args.runs} runs each, medians, warm page cache")
    print(f"{'command':<36} {'wall s':>8} {'x validate':>11}")
    for name, values in walls.items():
        median = statistics.median(values)
        print(f"{name:<36} {median:>8.3f} {median / base:>11.3f}")
    print(f"weights_key in process (headers + samples): {key_ms:.2f} ms")
    return 0


def key_in_process(path: Path, runs: int) -> float:
    """Median milliseconds of reading the drafter's headers and computing its weights key, in this process."""
    from eagle3_convert.convert import read_source
    from eagle3_convert.fingerprint import weights_key

    times = []
    for _ in range(runs):
        start = time.perf_counter()
        weights_key(read_source(str(path)).drafter)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
