"""Every CLI command over every checkpoint we hold, in one text file: the proof that a restructuring
changed no behaviour (`diff` of two snapshots must be empty).

    mkdir "$BEFORE" && git archive HEAD | tar -x -C "$BEFORE"     # the tree before the change
    PYTHONPATH="$BEFORE" python tools/behaviour_snapshot.py > before.txt  # keep both outside the repository
    PYTHONPATH=$PWD python tools/behaviour_snapshot.py > after.txt
    diff before.txt after.txt

The package comes from PYTHONPATH (so an older tree can be snapshot); the checkpoints come from THIS
repository (tests/data, examples, the builder matrix of tests/builders.py, the hostile corpus of
tests/hostile.py), so both snapshots run the same inputs. Each command runs in-process (click's runner,
exceptions caught and recorded) in an isolated HOME/registry/Hub-offline environment; the file records its
exit code, stdout, stderr and the sha256 of every file it wrote, with the work dir and timestamps normalised.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
DATA = TESTS / "data"
EXAMPLE = REPO / "examples" / "tiny-llama-speculators"
LAYOUTS = ("speculators", "sglang", "vllm", "eagle", "modelopt", "gguf")
ENGINE_SPELLINGS = ("speculators", "vllm", "vllm-v1", "vllm-v2", "sglang", "trtllm", "llamacpp")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?( ?(Z|UTC|[+-]\d\d:?\d\d))?")
# The digests a command prints of a file it writes with a timestamp inside (sidecar, model card).
STAMPED_DIGEST = re.compile(r'((?:eagle3-convert\.json|README\.md)(?:"|\s+\d+ B\s+sha256 )(?:,\s*"size": \d+,\s*"sha256": ")?)'
                            r"[0-9a-f]{64}")


class Snapshot:
    def __init__(self, work: Path, out):
        self.work, self.out, self.n = work, out, 0

    def norm(self, text: str) -> str:
        text = text.replace(str(self.work.resolve()), "<WORK>").replace(str(self.work), "<WORK>")
        text = text.replace(str(REPO), "<REPO>")
        return STAMPED_DIGEST.sub(r"\1<SHA256>", TIMESTAMP.sub("<TS>", text))

    def run(self, label: str, *args: str, watch: Path | None = None) -> str:
        """Run one command; record everything it said and every file it left under `watch`."""
        from click.testing import CliRunner

        from eagle3_convert.cli import main

        argv = [str(a) for a in args]
        before = _tree(watch, self.norm) if watch else {}
        result = CliRunner().invoke(main, argv, catch_exceptions=True)
        self.n += 1
        lines = [f"### {label}: eagle3-convert {self.norm(' '.join(argv))}", f"exit {result.exit_code}"]
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            lines.append(f"EXCEPTION {type(result.exception).__name__}: {self.norm(str(result.exception))}")
        lines += ["--- stdout", self.norm(result.stdout), "--- stderr", self.norm(result.stderr)]
        if watch:
            after = _tree(watch, self.norm)
            lines.append("--- files")
            lines += [f"{self.norm(str(p))} {digest}" for p, digest in sorted(after.items()) if before.get(p) != digest]
        self.out.write("\n".join(lines) + "\n")
        return result.stdout


def _tree(root: Path, norm=None) -> dict[Path, str]:
    out = {}
    if root.exists():
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.is_symlink() and "state" not in p.relative_to(root).parts[:1]:
                try:
                    data = p.read_bytes()
                except OSError:
                    continue
                if p.suffix == ".json" or p.name == "README.md":  # sidecars and cards carry times and paths
                    data = norm(data.decode("utf-8", "replace")).encode()
                out[p] = hashlib.sha256(data).hexdigest()
    return out


def _help(snap: Snapshot) -> None:
    from eagle3_convert.cli import main

    def walk(cmd, path: list[str]) -> None:
        snap.run("help", *path, "--help")
        for name in sorted(getattr(cmd, "commands", {})):
            walk(cmd.commands[name], [*path, name])

    walk(main, [])
    snap.run("version", "--version")


def _checkpoints(work: Path) -> dict[str, Path]:
    """name -> a private copy of every checkpoint we hold."""
    from builders import DrafterSpec, build_drafter, expected_refusal

    src = work / "src"
    found = {"example": EXAMPLE}
    for sample in sorted(DATA.iterdir()):
        if (sample / "checkpoint").is_dir():
            found[sample.name] = sample / "checkpoint"
    out = {}
    for name, path in found.items():
        shutil.copytree(path, src / name)
        out[name] = src / name
    for config in sorted((DATA / "real-configs").glob("*.json")):  # configs alone: what reads without weights
        (src / f"cfg-{config.stem}").mkdir(parents=True)
        shutil.copy(config, src / f"cfg-{config.stem}" / "config.json")
        out[f"cfg-{config.stem}"] = src / f"cfg-{config.stem}"
    specs = {"llama": DrafterSpec(), "no-ids": DrafterSpec(capture_boundaries=None),
             "qwen3": DrafterSpec(family="qwen3"), "full-vocab": DrafterSpec(draft_vocab_size=None),
             "flags": DrafterSpec(norm_before_residual=True, fc_norm=True),
             "mla": DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3"),
             "bin": DrafterSpec(pickled=True)}
    for spec_name, spec in specs.items():
        for layout in ("speculators", "sglang", "vllm", "eagle", "modelopt"):
            if spec.pickled and layout != "eagle":
                continue
            name = f"built-{layout}-{spec_name}"
            try:
                build_drafter(src / name, layout, spec)
            except Exception as e:  # noqa: BLE001 - a spec the builder cannot spell is simply not in the matrix
                print(f"# not built {name}: {e}", file=sys.stderr)
                continue
            out[name] = src / name
            _ = expected_refusal
    return out


def _hostile(work: Path) -> dict[str, Path]:
    from hostile import hostile_cases

    out = {}
    root = work / "hostile"
    root.mkdir()
    for case in hostile_cases():
        dest = root / case.name
        case.build(dest)
        out[f"hostile-{case.name}"] = dest
    return out


def main() -> int:
    sys.path.insert(0, str(TESTS))
    work = Path(tempfile.mkdtemp(prefix="e3snap-"))
    from hostile import isolated_env

    os.environ.pop("HF_TOKEN", None)
    os.environ.pop("HUGGING_FACE_HUB_TOKEN", None)
    os.environ.update(isolated_env(work))
    os.environ["COLUMNS"] = "100"
    tempfile.tempdir = None
    import eagle3_convert

    out = sys.stdout
    out.write(f"# eagle3_convert from {Path(eagle3_convert.__file__).parent.parent == REPO and 'this tree' or 'PYTHONPATH'}\n")
    snap = Snapshot(work, out)
    try:
        _help(snap)
        _commands(snap, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# {snap.n} commands", file=sys.stderr)
    return 0


def _commands(snap: Snapshot, work: Path) -> None:
    from gguf_target import write_target_gguf

    target_dir = DATA / "targets" / "llama-tiny"
    target_gguf = write_target_gguf(work / "target.gguf", layers=8, hidden=64, vocab=512)
    small_gguf = write_target_gguf(work / "target-small.gguf", layers=8, hidden=32, vocab=96)
    outs = work / "out"
    checkpoints = _checkpoints(work)
    # every command on every held checkpoint
    for name, src in checkpoints.items():
        snap.run(name, "inspect", src)
        snap.run(name, "inspect", "--json", src)
        snap.run(name, "inspect", "--target", target_dir, src)
        snap.run(name, "validate", src)
        snap.run(name, "validate", "--json", src)
        snap.run(name, "validate", "--strict", "--target", target_dir, src)
        snap.run(name, "validate", "--deep", "--json", "-q", src)
        for engine in ENGINE_SPELLINGS:
            snap.run(name, "validate", "--engine", engine, src)
        for layout in LAYOUTS:
            snap.run(name, "validate", "--from", layout, "--json", src)
        for layout in LAYOUTS:
            dst = outs / f"{name}-{layout}"
            extra = (["--target-gguf", small_gguf if "built" in name else target_gguf] if layout == "gguf" else [])
            snap.run(name, "convert", "--to", layout, "-q", "--verifier", "org/target-model", *extra, src, dst,
                     watch=outs)
            if dst.is_dir():
                snap.run(f"{name} -> {layout}", "inspect", "--json", dst)
                snap.run(f"{name} -> {layout}", "validate", dst)
        snap.run(name, "convert", "--to", "sglang", "--json", "--no-registry", "-q", src, outs / f"{name}-json",
                 watch=outs)
        snap.run(name, "registry", "add", "--json", src)
    # --from every layout, the conversions back from gguf, options
    for name in ("example", "specforge-sglang", "eagle-original", "speculators-trained"):
        src = checkpoints[name]
        for layout in LAYOUTS:
            snap.run(name, "inspect", "--from", layout, src)
            snap.run(name, "convert", "--from", layout, "--to", "vllm", "-q", src, outs / f"{name}-from-{layout}",
                     watch=outs)
        snap.run(name, "convert", "--to", "speculators", "-q", "--max-shard-size", "1KB", src, outs / f"{name}-shards",
                 watch=outs)
        snap.run(name, "convert", "--to", "sglang", "-q", "--capture-layers", "1,3,5", "--convention", "boundary",
                 "--trained-with", "snapshot", src, outs / f"{name}-ids", watch=outs)
        snap.run(name, "convert", "--to", "gguf", "-q", "--outtype", "f16", "--target-gguf", target_gguf, src,
                 outs / f"{name}-f16", watch=outs)
        snap.run(name, "convert", "--to", "sglang", "-q", "--target", target_dir, src, outs / f"{name}-target",
                 watch=outs)
        snap.run(name, "publish", src, "org/drafter", "--dry-run", "--json")
        snap.run(name, "publish", src, "org/drafter", "--dry-run", "--layout", "vllm")
    for name in ("example", "specforge-sglang"):
        gguf = outs / f"{name}-gguf"
        for layout in LAYOUTS[:-1]:
            snap.run(f"{name}.gguf", "convert", "--to", layout, "-q", gguf, outs / f"{name}-gguf-{layout}", watch=outs)
    snap.run("h2", "convert", "--to", "vllm", "-q", "--repair-d2t-absolute", checkpoints["h2-d2t-absolute"],
             outs / "h2-repaired", watch=outs)
    # error cases
    example = checkpoints["example"]
    snap.run("error", "convert", "--to", "sglang", example, outs / "example-sglang")  # DST not empty
    snap.run("error", "convert", "--to", "sglang", "-q", "--force", example, outs / "example-sglang", watch=outs)
    snap.run("error", "convert", "--to", "nope", example, outs / "x")
    snap.run("error", "convert", "--to", "gguf", example, outs / "no-target-gguf", watch=outs)
    snap.run("error", "convert", "--to", "sglang", work / "missing", outs / "x", watch=outs)
    snap.run("error", "convert", "--to", "sglang", "--max-shard-size", "lots", example, outs / "x", watch=outs)
    snap.run("error", "convert", "--to", "sglang", "--capture-layers", "1,a", example, outs / "x", watch=outs)
    snap.run("error", "convert", "--to", "sglang", "--capture-layers", "1,2,3", example, outs / "x", watch=outs)
    snap.run("error", "inspect", work / "missing")
    snap.run("error", "validate", "--json", work / "missing")
    snap.run("error", "validate", "--target", work / "missing", example)
    snap.run("error", "inspect", "not/a-repo-here")
    snap.run("error", "registry", "show", "nope")
    snap.run("error", "registry", "lineage", "nope")
    snap.run("error", "registry", "remove", "nope")
    snap.run("error", "registry", "list", "--registry", work / "nowhere" / "r.db")
    snap.run("error", "search", "--target", "org/none", "--registry", work / "nowhere" / "r.db")
    # the registry as the commands left it
    listing = snap.run("registry", "registry", "list", "--json")
    snap.run("registry", "registry", "list")
    snap.run("registry", "registry", "list", "--target", "org/target-model")
    for drafter_id in sorted(set(re.findall(r'"drafter_id": "([0-9a-f]{64})"', listing)))[:12]:
        snap.run("registry", "registry", "show", drafter_id)
        snap.run("registry", "registry", "show", "--json", drafter_id)
        snap.run("registry", "registry", "lineage", drafter_id)
        snap.run("registry", "registry", "lineage", "--json", drafter_id)
    for target in ("org/target-model", "ORG/Target-Model", "meta-llama/Llama-3.1-8B-Instruct"):
        snap.run("search", "search", "--target", target)
        snap.run("search", "search", "--json", "--target", target)
        for engine in ENGINE_SPELLINGS:
            snap.run("search", "search", "--target", target, "--engine", engine)
    snap.run("registry", "registry", "add", example, "--capture-layers", "2,4,6", "--convention", "boundary",
             "--target", target_dir, "--trained-with", "snapshot run")
    snap.run("registry", "validate", example)
    for drafter_id in sorted(set(re.findall(r'"drafter_id": "([0-9a-f]{64})"', listing)))[:3]:
        snap.run("registry", "registry", "remove", "--json", drafter_id)
    snap.run("registry", "registry", "list")
    # the hostile corpus: every command refuses each one cleanly
    for name, src in _hostile(work).items():
        snap.run(name, "inspect", src)
        snap.run(name, "inspect", "--json", src)
        snap.run(name, "validate", "--json", src)
        snap.run(name, "validate", "--deep", src)
        snap.run(name, "convert", "--to", "vllm", "-q", src, outs / name, watch=outs)
        snap.run(name, "convert", "--to", "gguf", "-q", "--target-gguf", target_gguf, src, outs / f"{name}-gguf",
                 watch=outs)
        snap.run(name, "registry", "add", src)


if __name__ == "__main__":
    sys.exit(main())
