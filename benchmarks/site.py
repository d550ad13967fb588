"""`registry site` at fleet size (issue 37): a registry of N drafters (default 1,000) written as a site, timed, and
the index measured in a real headless Chromium (tests/browser.py) for whether it stays usable.

    python benchmarks/site.py [--drafters 1000] [--work DIR] [--before TREE] [--no-browser]

The registry is filled through the store's public API (a drafter's id is its weights; hashing 1,000 checkpoints
would time `registry add`, not the site): each drafter gets 30 targets' worth of names, two local copies of its own
(tests/data samples in two layouts, in a directory per drafter: config.json copied, the weights hard-linked, so
every copy is a path of its own, read from disk and judged by every engine at every release the tool models, as a
real registry's would be), a conversion edge and three acceptance measurements. Timed, the CLI as a user runs it
with a 3-release fleet, one after the other on the same registry: `--before TREE` (the CLI of that source tree,
e.g. a `git archive` of an older commit), the first build (an empty verdict cache: every copy judged), a rebuild
(nothing changed), and a rebuild after a tenth of the copies were touched. Then in Chromium: the index's load time,
a filter's time and a sort's time over all rows.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def fill(registry: Path, work: Path, n: int) -> None:
    from eagle3_convert.registry.models import Acceptance, LineageEdge, Location
    from eagle3_convert.registry.store import open_registry
    from eagle3_convert.target_identity import TargetIdentity

    def link(src: str, dst: str) -> None:
        (shutil.copy2 if src.endswith(".json") else os.link)(src, dst)  # a touched config is this copy's alone

    day = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with open_registry(registry) as store:
        for i in range(n):
            copies = []
            for sample, layout in (("specforge-sglang", "sglang"), ("speculators-trained", "speculators")):
                dest = work / "copies" / str(i) / sample
                shutil.copytree(REPO / "tests" / "data" / sample / "checkpoint", dest, copy_function=link)
                copies.append(Location(layout=layout, uri=str(dest)))
            drafter_id = hashlib.sha256(f"drafter {i}".encode()).hexdigest()
            target = TargetIdentity(name_or_path=f"org{i % 30}/Model-{i % 30}-8B-Instruct", num_hidden_layers=8)
            store.upsert_drafter(drafter_id, target=target, capture_boundaries=[2, 4, 5], trained_with=f"run {i}",
                                 locations=copies, lineage=[LineageEdge(source=copies[0], dest=copies[1],
                                                                        tool="eagle3-convert")])
            for j in range(3):
                store.add_acceptance(drafter_id, Acceptance(
                    target_name_or_path=target.name_or_path, prompts_sha256="ab" * 32, prompts=8, max_new_tokens=64,
                    k=3, capture_boundaries=[2, 4, 5], mean_accepted_length=1.5 + (i % 17) / 10 + j / 20,
                    per_position=[0.7, 0.5, 0.3], rounds=100, tokens_per_second=40.0, device="cpu",
                    tool="benchmark", measured_at=day + timedelta(days=7 * j)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafters", type=int, default=1000)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--before", type=Path, metavar="TREE", help="also time the CLI of this source tree")
    parser.add_argument("--fill-only", type=Path, metavar="DIR", help=argparse.SUPPRESS)  # a registry for --before
    args = parser.parse_args()
    if args.fill_only:  # run by --before with that tree first on PYTHONPATH: a registry of its own schema
        fill(args.fill_only / "registry.db", args.fill_only, args.drafters)
        return 0
    work = Path(tempfile.mkdtemp(prefix="eagle3-site-bench-", dir=args.work))
    try:
        registry, out = work / "registry.db", work / "site"
        begun = time.monotonic()
        fill(registry, work, args.drafters)
        print(f"registry of {args.drafters} drafters filled in {time.monotonic() - begun:.1f} s")
        argv = ["registry", "site", str(out), "--registry", str(registry), "--engine", "sglang==0.5.11,vllm==0.24.0",
                "--force"]
        env = {**os.environ, "EAGLE3_SITE_CACHE": str(work / "site-verdicts.db")}
        runs: dict[str, float] = {}
        if args.before:  # its own registry (an older schema than ours, which it would refuse), its own copies
            from peers import before_cli

            tree, old = args.before.resolve(), work / "before"
            subprocess.run([sys.executable, __file__, "--drafters", str(args.drafters), "--fill-only", str(old)],
                           check=True, env={**os.environ, "PYTHONPATH": str(tree)})
            old_argv = [*argv[:4], str(old / "registry.db"), *argv[5:]]
            runs["before (--before tree)"] = timed([*before_cli(tree), *old_argv], env)
        runs["first build (empty cache)"] = timed([sys.executable, "-m", "eagle3_convert", *argv], env)
        files = [p for p in out.rglob("*") if p.is_file()]
        index = (out / "index.html").stat().st_size
        print(f"site: {len(files)} files, {sum(p.stat().st_size for p in files) / 2**20:.1f} MiB; "
              f"index.html {index / 2**10:.0f} KiB")
        runs["rebuild, nothing changed"] = timed([sys.executable, "-m", "eagle3_convert", *argv], env)
        for i in range(0, args.drafters, 10):
            os.utime(work / "copies" / str(i) / "speculators-trained" / "config.json")
        runs["rebuild, 1 in 20 copies touched"] = timed([sys.executable, "-m", "eagle3_convert", *argv], env)
        base = runs.get("before (--before tree)") or runs["first build (empty cache)"]
        for name, seconds in runs.items():
            print(f"registry site, {args.drafters} drafters, {name}: {seconds:.1f} s wall (the whole CLI), "
                  f"{seconds / base:.2f} x the {'before' if args.before else 'first build'}")
        if not args.no_browser:
            browse(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def timed(command: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one CLI run; the machine's load as it starts is printed (the figures are ratios of runs
    made one after the other: a load that changes between them moves them)."""
    print(f"  (load average {os.getloadavg()[0]:.1f} as it starts)")
    begun = time.monotonic()
    subprocess.run(command, check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    return time.monotonic() - begun


def browse(out: Path) -> None:
    import browser

    if browser.find() is None:
        print("chromium not installed: the index was not measured in a browser")
        return
    b = browser.Browser()
    try:
        begun = time.monotonic()
        b.open((out / "index.html").as_uri())
        loaded = time.monotonic() - begun
        rows = b.eval("document.querySelectorAll('#drafters tbody tr').length")
        filtered = b.eval("""(() => { const t = performance.now(), f = document.getElementById('filters');
            f.elements.engine.value = 'sglang==0.5.11'; f.elements.verdict.value = 'refused';
            f.dispatchEvent(new Event('change'));
            return [performance.now() - t, Array.from(document.querySelectorAll('#drafters tbody tr'))
                    .filter(r => !r.hidden).length]; })()""")
        sort_ms = b.eval("""(() => { const t = performance.now();
            Array.from(document.querySelectorAll('#drafters th')).find(h => h.textContent.includes('newest'))
            .click(); return performance.now() - t; })()""")
        print(f"index in Chromium: {rows} rows, loaded (load event) in {loaded * 1000:.0f} ms; filter (SGLang 0.5.11 refused) "
              f"{filtered[0]:.0f} ms ({filtered[1]} rows left); sort by acceptance {sort_ms:.0f} ms")
    finally:
        b.close()


if __name__ == "__main__":
    sys.exit(main())
