"""The report: the markdown table, issue 7's targets as met or MISSED, the machine, and RESULTS files."""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
from importlib import metadata
from pathlib import Path

from cases import DEFAULT_WORK, Op, Size

# Issue 7 targets.
CONVERT_VS_CP = 1.3
PEAK_RSS_MIB = 100
VALIDATE_HEADER_S = 0.1
DEEP_VS_READ = 0.70
HELP_S = 0.3
VS_SPECULATORS = 8.0


def fmt_ratio(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}×"


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


REFUSAL = re.compile(r"^error: .*\[(E-[A-Z0-9-]+)\]")


def outcome(op: Op) -> tuple[str, str | None]:
    """('ok' | 'refused' | 'failed', the line that says why) over all of an op's runs."""
    bad = op.failed
    if bad is None:
        return "ok", None
    last = bad.stderr_tail.strip().splitlines()[-1] if bad.stderr_tail.strip() else f"exit {bad.rc}"
    # Our CLI refusing what a layout cannot express is correct behaviour, not a failure.
    if op.kind == "convert" and bad.rc == 1 and REFUSAL.match(last):
        return "refused", f"refused [{REFUSAL.match(last).group(1)}]"
    return "failed", f"exit {bad.rc}: {last[:160]}"


def rows_and_failures(ops: list[Op], toys: set[str]) -> tuple[list[list[str]], list[str]]:
    """Table rows, and a line for every command that failed (a refusal is not a failure)."""
    rows, failures = [], []
    for op in ops:
        if op.skipped is not None:
            rows.append([op.size, op.name, "skipped", "", "", "", "", op.skipped])
            continue
        same = {o.name: o for o in ops if o.size == op.size and o.samples}
        floor, durable = same.get("cp -r"), same.get("cp -r + sync")
        read = same.get("cat weights > /dev/null")
        ours = same.get("convert sglang -> speculators") or same.get("convert eagle .bin -> speculators")
        walls = [s.wall for s in op.samples]
        state, why = outcome(op)
        target = ""
        if state != "ok":
            target = why
            if state == "failed":
                failures.append(f"{op.size} {op.name}: {why}")
        elif op.size in toys and op.kind in ("convert", "deep", "peer"):
            target = "toy size: no speed target"
        elif op.kind == "convert" and floor:
            target = f"≤ {CONVERT_VS_CP}× cp: {verdict(op.wall / floor.wall <= CONVERT_VS_CP)}"
        elif op.kind == "deep" and read:
            speed = read.wall / op.wall
            target = f"{speed:.0%} of read speed (≥ {DEEP_VS_READ:.0%}): {verdict(speed >= DEEP_VS_READ)}"
        elif op.kind == "validate":
            target = f"≤ {VALIDATE_HEADER_S} s: {verdict(op.wall <= VALIDATE_HEADER_S)}"
        elif op.kind == "help":
            target = f"≤ {HELP_S} s: {verdict(op.wall <= HELP_S)}"
        elif op.kind == "peer" and ours and outcome(ours)[0] == "ok":
            speedup = op.wall / ours.wall
            target = (f"ours ({ours.name.removeprefix('convert ')}) {speedup:.1f}× faster (≥ {VS_SPECULATORS:g}×): "
                      f"{verdict(speedup >= VS_SPECULATORS)}")
        elif op.kind == "reference" and same.get("inspect"):
            target = f"reference: {op.wall / same['inspect'].wall:.1f}× our inspect of the same file"
        elif op.kind == "before" and same.get(op.name.split(" (as of ")[0]):
            now = same[op.name.split(" (as of ")[0]]
            target = f"now {op.wall / now.wall:.1f}× faster, {op.rss_mib / now.rss_mib:.0f}× less memory"
        ratio_kinds = ("floor", "read", "convert", "peer", "deep", "reference", "before")
        rows.append([op.size, op.name, f"{op.wall:.3f}", f"{min(walls):.3f}–{max(walls):.3f}", f"{op.rss_mib:.1f}",
                     fmt_ratio(op.wall / floor.wall) if floor and op.kind in ratio_kinds else "",
                     fmt_ratio(op.wall / durable.wall) if durable and op.kind == "convert" else "", target])
    return rows, failures


def target_summary(ops: list[Op], toys: set[str]) -> list[str]:
    """One line per issue-7 target and size: the measured figure, the bound, met or MISSED."""
    lines = []
    measured = [o for o in ops if o.samples and outcome(o)[0] == "ok"]
    for size in dict.fromkeys(o.size for o in measured):
        same = {o.name: o for o in measured if o.size == size}
        floor, durable, read = same.get("cp -r"), same.get("cp -r + sync"), same.get("cat weights > /dev/null")
        converts = [o for o in measured if o.size == size and o.kind == "convert"]
        refused = [o for o in ops if o.size == size and o.kind == "convert" and outcome(o)[0] == "refused"]
        if converts and floor and size not in toys:
            ratios = [o.wall / floor.wall for o in converts]
            met = sum(r <= CONVERT_VS_CP for r in ratios)
            durable_part = ""
            if durable:
                d = [o.wall / durable.wall for o in converts]
                durable_part = f" (vs cp -r + sync: {min(d):.2f}–{max(d):.2f}×)"
            lines.append(f"{size}: convert ≤ {CONVERT_VS_CP}× cp — {min(ratios):.2f}–{max(ratios):.2f}× over "
                         f"{len(converts)} directions{durable_part}; met in {met}/{len(converts)}: "
                         f"{verdict(met == len(converts))}"
                         + (f"; {len(refused)} refused by design" if refused else ""))
        to_gguf = [o for o in converts if o.name.endswith("-> gguf")]
        if to_gguf and floor and size not in toys:  # issue 14: --to gguf against cp, in bounded memory
            top = max(to_gguf, key=lambda o: o.rss_mib)
            lines.append(f"{size}: --to gguf — {', '.join(f'{o.wall / floor.wall:.2f}×' for o in to_gguf)} cp -r "
                         f"({', '.join(o.name.removeprefix('convert ') for o in to_gguf)}); peak RSS ≤ {PEAK_RSS_MIB} "
                         f"MiB — highest {top.rss_mib:.1f} MiB: {verdict(top.rss_mib <= PEAK_RSS_MIB)}")
        ours = [o for o in measured if o.size == size and o.kind in ("convert", "validate", "deep", "inspect", "help")]
        if ours:
            top = max(ours, key=lambda o: o.rss_mib)
            lines.append(f"{size}: peak RSS ≤ {PEAK_RSS_MIB} MiB — highest {top.rss_mib:.1f} MiB ({top.name}): "
                         f"{verdict(top.rss_mib <= PEAK_RSS_MIB)}")
        if "validate" in same:
            wall = same["validate"].wall
            lines.append(f"{size}: header-level validate ≤ {VALIDATE_HEADER_S} s — {wall:.3f} s: "
                         f"{verdict(wall <= VALIDATE_HEADER_S)}")
        if "validate --deep" in same and read and size not in toys:
            speed = read.wall / same["validate --deep"].wall
            lines.append(f"{size}: validate --deep ≥ {DEEP_VS_READ:.0%} of read speed — {speed:.0%}: "
                         f"{verdict(speed >= DEEP_VS_READ)}")
        ours_name = next((n for n in ("convert sglang -> speculators", "convert eagle .bin -> speculators")
                          if n in same), None)
        if "speculators convert (peer)" in same and ours_name and size not in toys:
            speedup = same["speculators convert (peer)"].wall / same[ours_name].wall
            lines.append(f"{size}: ≥ {VS_SPECULATORS:g}× faster than speculators convert — {speedup:.1f}×: "
                         f"{verdict(speedup >= VS_SPECULATORS)}")
        befores = [o for o in measured if o.size == size and o.kind == "before"]
        pairs = [(o, same[o.name.split(" (as of ")[0]]) for o in befores if o.name.split(" (as of ")[0] in same]
        if pairs:
            header = [f"{now.name} {old.wall / now.wall:.1f}×" for old, now in pairs if now.kind != "convert"]
            copies = [f"{now.name} {old.wall / now.wall:.1f}× ({old.wall:.2f} s → {now.wall:.2f} s; a copy of the "
                      "weights, bound by the disk)" for old, now in pairs if now.kind == "convert"]
            fast = all(old.wall / now.wall >= 10 for old, now in pairs if now.kind != "convert")
            lines.append(f"{size}: .bin commands ≥ 10× faster than {pairs[0][0].name.split(' (as of ')[1][:-1]} — "
                         f"{', '.join(header)}: {verdict(fast)}" + (f"; {', '.join(copies)}" if copies else ""))
        if "eagle3-convert --help" in same:
            wall = same["eagle3-convert --help"].wall
            lines.append(f"--help ≤ {HELP_S} s — {wall:.3f} s: {verdict(wall <= HELP_S)}")
    return lines


HEADERS = ["size", "operation", "wall s (median)", "min–max", "peak RSS MiB", "× cp", "× cp+sync", "target / note"]


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> dict[str, str]:
    mem = next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal"))
    fs = subprocess.run(["df", "-T", str(DEFAULT_WORK.parent)], capture_output=True, text=True).stdout.splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    versions = []
    for pkg in ("eagle3-convert", "click", "pydantic", "safetensors", "huggingface_hub", "numpy", "tqdm", "torch",
                "speculators"):
        try:
            versions.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{pkg} (not installed)")
    return {
        "cpu": f"{os.cpu_count()} × {cpu}", "memory": f"{int(mem) / (1 << 20):.1f} GiB",
        "kernel": platform.release(), "filesystem": fs[-1].split()[1] if len(fs) > 1 else "?",
        "python": platform.python_version(), "packages": ", ".join(versions),
    }


def write_results(out: Path, table: str, summary: list[str], failures: list[str], notes: list[str], progress: list[str],
                  argv: list[str], info: dict[str, str], sizes: dict[str, tuple[Size, int]],
                  bin_sizes: dict[str, tuple[Size, int]] | None = None, imports: list[str] | None = None) -> None:
    size_lines = [f"- `{s.name}`: {'MLA' if s.mla else 'Llama'} attention, H={s.hidden}, heads {s.heads}/"
                  f"{s.kv_heads}, I={s.intermediate}, V={s.vocab}, Vd={s.draft_vocab}, k={s.aux}, "
                  f"{'with' if s.embed else 'no'} embed_tokens, bf16: {n / 1e9:.2f} GB of weights"
                  for s, n in sizes.values()]
    text = "\n".join([
        "# Benchmark results", "",
        "Produced by `benchmarks/run.py` in one run; reproduce with:", "",
        "```", "python " + shlex.join(["benchmarks/run.py", *argv]), "```", "",
        "## Machine", "",
        *[f"- {k}: {v}" for k, v in info.items()], "",
        *(["## Drafters (random bf16 weights, generated in the speculators layout; the others converted from it)", "",
           *size_lines, ""] if size_lines else []),
        *(["## Original EAGLE `pytorch_model.bin` (rows `<size> .bin`)", "",
           *[f"- `{s.name} .bin`: the same drafter in the original-EAGLE layout (midlayer.*, its config.json as our "
             f"`--to eagle` writes it) as a torch zip `pytorch_model.bin` of {n / 1e9:.2f} GB, one storage per tensor, "
             "written by `write_torch_bin` (no torch: the pickle torch.save writes, assembled by hand; "
             "`tests/test_bin_reader.py` checks torch.load reads it)" for s, n in bin_sizes.values()],
           "- torch imports on .bin commands (`python -X importtime -m eagle3_convert ...`):",
           *[f"  - {line}" for line in imports or ["not checked in this run"]], ""]
          if bin_sizes else []),
        "## Results", "",
        table, "",
        "`× cp` is the median wall time over the median of `cp -r` of the same directory in the same run;",
        "`× cp+sync` over `cp -r` followed by `sync` of the copied files (our convert fsyncs its output).",
        "Peak RSS is the kernel's `ru_maxrss` of the command as GNU `time -f %M` reports it (wait4).", "",
        "## Targets (issue 7)", "",
        *[f"- {line}" for line in summary], "",
        *(["Commands that failed (a refusal by design is not a failure):", "", *[f"- {f}" for f in failures], ""]
          if failures else []),
        "## Progress bars (on the largest size)", "",
        *([f"- {line}" for line in progress] or ["- not checked in this run"]), "",
        "## Notes", "",
        *[f"- {n}" for n in notes], "",
    ])
    out.write_text(text)
