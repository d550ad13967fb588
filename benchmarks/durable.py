"""Durable convert against its floor, `cp -r SRC DST && sync`, cold cache (issue 16, deliverable 3).

    python benchmarks/run.py --sizes 8b,8b-embed,kimi --runs 1 --layouts speculators,sglang \
        --inputs safetensors --keep --no-progress-check          # generates the drafters once, kept
    python benchmarks/durable.py --runs 3                         # then this, on the kept drafters

Each round, interleaved so that load on the shared machine touches every row alike: `cp -r && sync`,
`convert --to sglang` (from the speculators copy, or vLLM's for an MLA drafter: kimi) (writeback started during the copy), and the same convert with
EAGLE3_CONVERT_NO_WRITEBACK=1 (the final fsync does all the writing, as before issue 16). Before every
command: the previous output removed, `sync`, and the page cache dropped (`echo 3 > /proc/sys/vm/drop_caches`,
root only; otherwise the sources are evicted with posix_fadvise(DONTNEED), and the report says which).
`--cold data` evicts only the drafter (run.py's cold: warm Python). Reports the median wall time of each and its ratio to `cp -r && sync`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import DEFAULT_WORK  # noqa: E402
from measure import cli_entry, evict  # noqa: E402
from peers import before_cli  # noqa: E402


def drop_caches(sources: list[Path], data_only: bool) -> str:
    os.sync()
    if data_only:
        evict(sources)
        return "posix_fadvise(DONTNEED) of the sources (cold data, warm Python: --cold data)"
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "drop_caches"
    except OSError:
        evict(sources)
        return "posix_fadvise(DONTNEED) of the sources (drop_caches not writable)"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{cmd} failed: {done.stderr.strip()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="run.py's --work with --keep drafters")
    parser.add_argument("--sizes", default="8b,8b-embed,kimi")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", choices=("all", "data"), default="all",
                        help="all: drop the whole page cache, Python's own modules too (each command starts cold); "
                             "data: evict only the drafter's files, as run.py does")
    parser.add_argument("--before", type=Path, metavar="TREE",
                        help="also time convert from this source tree (e.g. `git archive 3f096bb`, before issue 16)")
    args = parser.parse_args()
    work = args.work.resolve()
    cli = cli_entry()
    env = {**os.environ, "EAGLE3_CONVERT_REGISTRY": str(work / "durable-registry.db"), "HF_HUB_OFFLINE": "1",
           "PYTHONPYCACHEPREFIX": str(work / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    off = {**env, "EAGLE3_CONVERT_NO_WRITEBACK": "1"}
    out = work / "durable-out"
    how = ""
    print("| size | GB | cp -r && sync (s) | cp -r && sync FILES (s) | convert (s) | ratio | ratio to sync FILES "
          "| convert, no writeback (s) | ratio | convert --before (s) | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        src = work / name / "speculators"
        if not (src / "config.json").is_file() and (work / name / "vllm" / "config.json").is_file():
            src = work / name / "vllm"  # an MLA drafter's home (cases.home_layout: speculators has no MLA class)
        if not (src / "config.json").is_file():
            raise SystemExit(f"{src}: no drafter; generate it with run.py --keep (see the docstring)")
        gb = sum(f.stat().st_size for f in src.rglob("*") if f.is_file()) / 1e9
        rows: dict[str, list[float]] = {"cp": [], "cpf": [], "convert": [], "off": [], "before": []}
        cmds = {"cp": (["sh", "-c", f'cp -r "{src}" "{out}" && sync'], env),
                # The same durability as convert's (fsync of each file and of the directory), without waiting for
                # every other process's dirty pages as a global `sync` does on a shared machine.
                "cpf": (["sh", "-c", f'cp -r "{src}" "{out}" && sync "{out}"/* "{out}"'], env),
                "convert": ([*cli, "--to", "sglang", "--quiet", str(src), str(out)], env),
                "off": ([*cli, "--to", "sglang", "--quiet", str(src), str(out)], off)}
        if args.before:  # first on sys.path: PYTHONPATH would come after '' (the cwd: the repo, from its root)
            cmds["before"] = ([*before_cli(args.before.resolve()), "--to", "sglang", "--quiet", str(src), str(out)],
                              env)
        subprocess.run([*cli, "--to", "sglang", "--quiet", str(src), str(out)], env=env, capture_output=True)
        for _ in range(args.runs):
            for key, (cmd, e) in cmds.items():
                shutil.rmtree(out, ignore_errors=True)
                how = drop_caches([src], args.cold == "data")
                rows[key].append(timed(cmd, e))
        shutil.rmtree(out, ignore_errors=True)
        med = {k: statistics.median(v) if v else float("nan") for k, v in rows.items()}
        print(f"| {name} | {gb:.2f} | {med['cp']:.2f} | {med['cpf']:.2f} | {med['convert']:.2f} "
              f"| {med['convert'] / med['cp']:.2f}x | {med['convert'] / med['cpf']:.2f}x "
              f"| {med['off']:.2f} | {med['off'] / med['cp']:.2f}x | {med['before']:.2f} | {med['before'] / med['cp']:.2f}x |",
              flush=True)
    print(f"\nmedian of {args.runs}, interleaved; cold cache: {how}; CLI: {' '.join(cli)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
