"""Start-up of the header-level commands (issue 16): `--help`, `inspect` and `validate` of a kept drafter, with no
registry and with one that holds the drafter's record, median of N rounds run interleaved, `python -c pass` in the
same rounds as the baseline. Warm page cache and bytecode (cached under the work dir, as run.py does). Each command's
CPU time (user + system) is printed beside its wall time: on a machine others load, it is the steadier of the two.
`--instructions` also counts each command's instructions once under valgrind (callgrind): the same count whatever
the load, where even CPU time doubles on a 2-core machine running 14 jobs (benchmarks/README.md, issue 20).

    python benchmarks/run.py --sizes 8b --runs 1 --layouts speculators,sglang --inputs safetensors --keep
    python benchmarks/startup.py --runs 11 [--before DIR_OF_A_GIT_ARCHIVE] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import DEFAULT_WORK  # noqa: E402
from measure import cli_entry  # noqa: E402
from peers import before_cli  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="run.py's --work with --keep drafters")
    parser.add_argument("--size", default="8b")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--before", type=Path, metavar="TREE", help="also time the CLI of this source tree")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each command's instructions under valgrind (load-independent; slow)")
    args = parser.parse_args()
    work = args.work.resolve()
    src = work / args.size / "speculators"
    if not (src / "config.json").is_file():
        raise SystemExit(f"{src}: no drafter; generate it with run.py --keep (see the docstring)")
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base.update(HF_HUB_OFFLINE="1", PYTHONPYCACHEPREFIX=str(work / "pycache"))
    absent = work / "startup-no-registry.db"
    absent.unlink(missing_ok=True)
    none, held = {**base, "EAGLE3_CONVERT_REGISTRY": str(absent)}, {**base, "EAGLE3_CONVERT_REGISTRY": str(
        work / "startup-registry.db")}
    subprocess.run([*cli_entry(), "--to", "sglang", "--quiet", "--force", str(src), str(work / "startup-out")],
                   env=held, check=True, capture_output=True)  # the registry now holds the drafter's record
    clis = {"": cli_entry(), **({" (--before)": before_cli(args.before.resolve())} if args.before else {})}
    rows: dict[str, tuple[list[str], dict[str, str]]] = {"python -c pass": ([sys.executable, "-c", "pass"], none)}
    for label, cli in clis.items():
        rows[f"--help{label}"] = ([*cli, "--help"], none)
        rows[f"inspect {args.size}{label}"] = ([*cli, "inspect", str(src)], none)
        rows[f"validate {args.size}, no registry{label}"] = ([*cli, "validate", str(src)], none)
        rows[f"validate {args.size}, registry holding its record{label}"] = ([*cli, "validate", str(src)], held)
    samples: dict[str, list[float]] = {name: [] for name in rows}
    cpu: dict[str, list[float]] = {name: [] for name in rows}  # user + system: what other load inflates least
    for cmd, env in rows.values():  # untimed: bytecode and page cache warmed
        subprocess.run(cmd, env=env, capture_output=True)
    loads = []
    for _ in range(args.runs):
        loads.append(os.getloadavg()[0])
        for name, (cmd, env) in rows.items():
            t = time.perf_counter()
            child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
            samples[name].append(time.perf_counter() - t)
            cpu[name].append(usage.ru_utime + usage.ru_stime)
            if os.waitstatus_to_exitcode(status) not in (0, 1):  # validate exits 1 on findings
                raise SystemExit(f"{cmd} failed (run it alone to see why)")
    base_wall, base_cpu = min(samples["python -c pass"]), min(cpu["python -c pass"])
    print("| command | wall s (median) | min | min over pass | cpu s (min) | over pass |\n|---|---|---|---|---|---|")
    for name, values in samples.items():
        print(f"| {name} | {statistics.median(values):.3f} | {min(values):.3f} | {min(values) - base_wall:+.3f} | "
              f"{min(cpu[name]):.3f} | {min(cpu[name]) - base_cpu:+.3f} |")
    print(f"\nmedian of {args.runs}, interleaved, warm, load average {min(loads):.1f}-{max(loads):.1f}; "
          f"CLI: {' '.join(cli_entry())}")
    if args.instructions:
        counts = {name: instructions(cmd, env) for name, (cmd, env) in rows.items()}
        print("\n| command | instructions (M) | over pass |\n|---|---|---|")
        for name, count in counts.items():
            print(f"| {name} | {count / 1e6:.0f} | {(count - counts['python -c pass']) / 1e6:+.0f} |")
    shutil.rmtree(work / "startup-out", ignore_errors=True)
    return 0


def instructions(cmd: list[str], env: dict[str, str]) -> int:
    """Instructions the command runs (valgrind's callgrind, its children not followed: the CLI is one process)."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"valgrind counted nothing for {cmd}: {done.stderr[-300:]}")
    return int(found.group(1))


if __name__ == "__main__":
    sys.exit(main())
