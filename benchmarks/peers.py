"""What eagle3-convert is measured against besides `cp`: `speculators convert`, torch.load (what the
.bin commands paid before issue 16), eagle3_convert as of an older commit (`--before`), and
whether a command imports torch at all (`-X importtime`)."""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from cases import REPO

TORCH_READ = ("import sys, torch\n"
              "state = torch.load(sys.argv[1], map_location='cpu', weights_only=True, mmap=True)\n"
              "for t in state.values():\n"
              "    t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()\n")


def has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def before_tree(ref: str, work: Path) -> Path:
    """eagle3_convert as of git `ref` (e.g. the commit before issue 16), extracted under `work`."""
    tree = work / "before"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "eagle3_convert"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"--before {ref}: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def before_cli(tree: Path) -> list[str]:
    """The CLI of that tree (first on sys.path, ahead of the installed package)."""
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); "
                                  "from eagle3_convert.cli import main; main()"]


def torch_imports(src: Path, out: Path) -> list[str]:
    """Whether inspect, validate and convert of the .bin import torch, from `python -X importtime`."""
    runs = {"inspect": ["inspect", str(src)], "validate": ["validate", str(src)],
            "convert": ["--to", "speculators", "--verifier", "x/y", "--quiet", "--no-record", str(src),
                        str(out / "imports")]}
    lines = []
    for name, argv in runs.items():
        shutil.rmtree(out / "imports", ignore_errors=True)
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "eagle3_convert", *argv],
                              capture_output=True, text=True)
        modules = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                   if line.startswith("import time:")]
        heavy = sorted({m.split(".")[0] for m in modules if m.split(".")[0] == "torch"})
        lines.append(f"{name} on the .bin: exit {done.returncode}, {len(modules)} modules imported, torch "
                     f"{'IMPORTED' if heavy else 'not imported'}, eagle3_convert.torch_zip "
                     f"{'imported' if 'eagle3_convert.torch_zip' in modules else 'NOT imported'}")
    shutil.rmtree(out / "imports", ignore_errors=True)
    return lines


def speculators_cli(explicit: str | None) -> tuple[list[str] | None, str]:
    """The peer's command and how it was found (with its version), or None and why it is skipped."""
    found = shutil.which("speculators")
    cmd = shlex.split(explicit) if explicit else ([found] if found else None)
    if cmd is None:
        return None, "speculators is not installed (optional peer; pass --speculators-cmd to point at one in a venv)"
    said = subprocess.run([*cmd, "--version"], capture_output=True, text=True)
    lines = said.stdout.strip().splitlines() if said.returncode == 0 else []
    version = lines[-1] if lines else "version unknown"
    return cmd, f"`{shlex.join(cmd)}` ({version})"
