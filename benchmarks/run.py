"""Benchmark eagle3-convert against `cp` on realistic drafters with random weights.

One run generates drafters (streamed to disk in bounded chunks, no torch), then measures,
side by side and interleaved round by round: `cp -r` of the same directory (the floor),
`cat` of the weight files (the speed of reading them once), every conversion between the
layouts the CLI lists, `speculators convert` when installed, `validate` (header level and
`--deep`) when the CLI has it, `inspect`, and `--help` cold start. Every command is a
subprocess: wall time is the median of --runs, peak RSS comes from the kernel (wait4).

The `.bin` input (rows `<size> .bin`) is the same drafter as original EAGLE publishes it, a
torch zip `pytorch_model.bin` written here without torch: convert to every layout, validate,
inspect, against `cp` of that directory, `speculators convert` when installed, and, when
torch is installed, the torch.load + decode every .bin command paid before issue 16; then
`python -X importtime` shows whether the .bin commands import torch.

    python benchmarks/run.py [--sizes 8b,8b-embed,kimi] [--runs 3] [--inputs safetensors,bin]
                             [--out PATH]      # default: RESULTS.md in the work directory
    python benchmarks/run.py --quick          # 8b, one run, speculators <-> sglang <-> gguf: under 2 minutes

The parts: cases.py (sizes, generated drafters, the plan), bin_input.py (the `.bin` input),
peers.py (speculators, torch.load, --before, -X importtime), measure.py (running and timing),
report.py (the table, the targets, the RESULTS file); this file is the command line.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from bin_input import plan_bin_ops, prepare_bin
from cases import DEFAULT_WORK, SIZES, Op, Size, as_llama, home_layout, plan_ops, prepare_size
from measure import check_progress, cli_capabilities, cli_entry, measure, supports_mla, warm_bytecode
from peers import before_cli, before_tree, speculators_cli, torch_imports
from report import machine, markdown_table, rows_and_failures, target_summary, write_results


# What --quick measures unless said otherwise: one real size, one run, one pair of layouts.
QUICK = {"sizes": "8b", "runs": 1, "layouts": "speculators,sglang,gguf", "inputs": "safetensors"}
FULL = {"sizes": "8b,8b-embed,kimi", "runs": 3, "layouts": None, "inputs": "safetensors,bin"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help=f"comma list of {', '.join(SIZES)} (default: {FULL['sizes']})")
    parser.add_argument("--runs", type=int, help=f"timed runs per command, median reported (default: {FULL['runs']})")
    parser.add_argument("--quick", action="store_true",
                        help="under 2 minutes: --sizes 8b --runs 1 --layouts speculators,sglang,gguf --inputs safetensors, "
                             "no progress check (each can still be given)")
    parser.add_argument("--out", type=Path,
                        help="markdown report (default: RESULTS.md in the work directory; the tracked "
                             "benchmarks/RESULTS.md only when named); '-' for none")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="where drafters are generated")
    parser.add_argument("--layouts", help="comma list of layouts to convert between (default: all `--to` lists)")
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold",
                        help="cold: evict the drafters from the page cache before every command; warm: pre-read them")
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the generated drafters")
    parser.add_argument("--before", metavar="GIT_REF",
                        help="also time inspect, validate and convert of the .bin with eagle3_convert as of this "
                             "commit (e.g. the one before issue 16; its reader needs torch)")
    parser.add_argument("--inputs",
                        help="comma list: safetensors (the layouts' copies) and/or bin (an original-EAGLE "
                             "pytorch_model.bin); bin alone keeps at most two copies of the weights on disk (default: "
                             f"{FULL['inputs']})")
    parser.add_argument("--speculators-cmd", help="the `speculators` executable to compare with, e.g. a venv's")
    parser.add_argument("--no-progress-check", action="store_true", help="skip the pseudo-terminal progress check")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.quick:
        args.no_progress_check = True
    if args.out is None:
        args.out = args.work / "RESULTS.md"

    names = [n.strip() for n in args.sizes.split(",") if n.strip()]
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; known: {', '.join(SIZES)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    inputs = {x.strip() for x in args.inputs.split(",") if x.strip()}
    if not inputs or not inputs <= {"safetensors", "bin"}:
        parser.error("--inputs is a comma list of safetensors, bin")

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    # Conversions record themselves in the drafter registry: keep that out of the user's own.
    registry = work / "registry.db"
    os.environ.update(EAGLE3_CONVERT_REGISTRY=str(registry), HF_HUB_OFFLINE="1")
    # An installed wheel has bytecode; a sandbox with PYTHONDONTWRITEBYTECODE would recompile
    # our modules on every start. Cache it under the work dir instead of the source tree.
    bytecode_off = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    pycache = work / "pycache"
    os.environ["PYTHONPYCACHEPREFIX"] = str(pycache)
    load_before = os.getloadavg()
    cli = cli_entry()
    layouts, commands = cli_capabilities(cli)
    if args.layouts:
        wanted = [x.strip() for x in args.layouts.split(",") if x.strip()]
        if "speculators" not in wanted or not set(wanted) <= set(layouts):
            parser.error(f"--layouts must include speculators (the generated one) and be among {', '.join(layouts)}")
        layouts = wanted
    warm_bytecode(cli, work, layouts, commands, bin_input="bin" in inputs)
    notes = [f"CLI measured: `{shlex.join(cli)}` (the console script, not a shell shim in front of it)",
             "bytecode: cached under the work dir (PYTHONPYCACHEPREFIX) and warmed once, untimed"
             + ("; this environment sets PYTHONDONTWRITEBYTECODE=1, which would recompile every module of ours "
                "on every start" if bytecode_off else ""),
             f"layouts converted between: {', '.join(layouts)}; CLI commands: {', '.join(sorted(commands))}"]
    cold = args.cache == "cold"
    notes.append("cache: " + ("cold data — `sync`, then every source file evicted from the page cache "
                              "(posix_fadvise DONTNEED) before every command; Python's own modules stay cached"
                              if cold else "warm — `sync`, then the sources read once before every command"))
    peer, peer_reason = speculators_cli(args.speculators_cmd)
    notes.append(f"speculators convert: {peer_reason}")
    mla = "kimi" in names and supports_mla(cli, work)
    if "kimi" in names:
        notes.append("kimi: " + ("MLA drafter (deepseek_v3 decoder, q_lora 1536, kv_lora 512, 64 heads)" if mla else
                                 "this build does not read MLA drafters: Llama attention with Kimi's widths"))

    all_ops: list[Op] = []
    sizes: dict[str, tuple[Size, int]] = {}
    out_dir = work / "out"
    progress: list[str] = []
    bin_sizes: dict[str, tuple[Size, int]] = {}
    imports: list[str] = []
    old_tree = before_tree(args.before, work) if args.before and "bin" in inputs else None
    try:
        help_op = Op("no drafter", "eagle3-convert --help", "help", [*cli, "--help"])
        for name in names:
            s = SIZES[name] if name != "kimi" or mla else as_llama(SIZES[name])
            sources: dict[str, Path] = {}
            out_dir.mkdir(parents=True, exist_ok=True)
            if "safetensors" in inputs:
                sources, nbytes, refused = prepare_size(s, work, cli, layouts, reuse=args.keep)
                notes += refused
                sizes[name] = (s, nbytes)
                ops = plan_ops(s, sources, layouts, out_dir, cli, commands, peer, peer_reason)
                measure(ops, args.runs, cold, [*sources.values(), work / s.name / "target"])  # + the target GGUF
                all_ops += ops
            if "bin" in inputs:
                bin_dir, bin_bytes, why = prepare_bin(s, work, cli, sources, reuse=args.keep)
                if bin_dir is None:
                    notes.append(f"{s.name} .bin: not measured: {why}")
                    continue
                bin_sizes[name] = (s, bin_bytes)
                if old_tree:  # compile the old tree's bytecode, untimed, as warm_bytecode does ours
                    subprocess.run([*before_cli(old_tree), "inspect", str(bin_dir)], capture_output=True)
                ops = plan_bin_ops(s, bin_dir, layouts, out_dir, cli, commands, peer, peer_reason,
                                   (args.before, old_tree) if old_tree else None)
                measure(ops, args.runs, cold, [bin_dir])
                all_ops += ops
                imports += [f"{s.name}: {line}" for line in torch_imports(bin_dir, out_dir)]
        measure([help_op], args.runs, cold, [])
        all_ops.append(help_op)
        if not args.no_progress_check and sizes:
            biggest = max(sizes, key=lambda n: sizes[n][1])
            home = work / biggest / home_layout(sizes[biggest][0])
            progress = [f"{biggest}: {line}" for line in check_progress(cli, home, out_dir,
                                                                     commands)]
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(pycache, ignore_errors=True)
        shutil.rmtree(work / "before", ignore_errors=True)
        for f in work.glob(registry.name + "*"):
            f.unlink()
        if not args.keep:
            for name in names:
                shutil.rmtree(work / name, ignore_errors=True)

    load_after = os.getloadavg()
    notes.append("load average (1, 5, 15 min) at start {:.2f} {:.2f} {:.2f}, at end {:.2f} {:.2f} {:.2f}; "
                 "the machine has {} cores".format(*load_before, *load_after, os.cpu_count()))
    toys = {n for n, (s, _) in sizes.items() if s.toy} | {f"{n} .bin" for n, (s, _) in bin_sizes.items() if s.toy}
    rows, failures = rows_and_failures(all_ops, toys)
    summary = target_summary(all_ops, toys)
    table = markdown_table(rows)
    print()
    print(table)
    print()
    for line in summary:
        print(f"target: {line}")
    for line in failures:
        print(f"FAILED: {line}")
    for line in progress:
        print(f"progress: {line}")
    for line in imports:
        print(f"imports: {line}")
    if str(args.out) != "-":
        write_results(args.out, table, summary, failures, notes, progress, argv, machine(), sizes, bin_sizes, imports)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
