"""Pinned, cached virtual environments for the tiers that run peer code (interop, engines).

A tier describes its venv as a `PeerVenv`: a name, the pip steps (installed one by one, in
order), and a constraints file that pins what must never move (torch's CPU build above all).
The venv is built once under a file lock into $<env_var>, else
~/.cache/eagle3-convert/<name>-<hash of the pins>, and marked complete by a READY file that
holds the pins; an interrupted build leaves a BUILDING file and is rebuilt. A build step that
fails removes the partial venv; the tier is skipped only when the package index cannot be reached
(`unavailable`), and fails on any other error, which tests/conftest.py enforces for every tier.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

READY = ".eagle3-interop-ready"  # written last: the venv is complete
BUILDING = ".eagle3-interop-building"  # written first: left over only by an interrupted build


@dataclass(frozen=True)
class PeerVenv:
    name: str  # the cache folder's prefix, and the tier's name in skip reasons
    env_var: str  # overrides the location
    steps: tuple[tuple[str, ...], ...]  # pip install arguments, one step each, in order
    constraints: tuple[str, ...]  # a resolution that would move these fails instead
    build_timeout_s: float = 1200  # the whole build; a hung index must not eat CI's time
    extra_pins: str = ""  # anything else the venv's content depends on (goes into the hash)

    def pins_text(self) -> str:
        python = f"python {platform.python_version()} at {sys.base_prefix}"  # a venv is bound to its interpreter
        steps = "\n".join(" ".join(step) for step in self.steps)
        return f"{python}\nconstraints: {' '.join(self.constraints)}\n{steps}\n{self.extra_pins}"

    def location(self) -> Path:
        if os.environ.get(self.env_var):
            return Path(os.environ[self.env_var]).expanduser().absolute()
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return cache / "eagle3-convert" / f"{self.name}-{hashlib.sha256(self.pins_text().encode()).hexdigest()[:12]}"

    def ensure(self, venv: Path | None = None) -> Path:
        """The venv's python; built under a lock so concurrent runs wait instead of racing."""
        return ensure_venv(self, venv or self.location())


def subprocess_env(**extra: str) -> dict[str, str]:
    """Our environment minus what would leak this interpreter's packages into the venv's python."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", **extra)
    return env


# Every tier skip says this, and only a skip that says it is allowed (tests/conftest.py fails the others).
INDEX_UNREACHABLE = "package index unreachable"
# What pip (urllib3, requests) and apt print when they cannot reach an index; anything else is a real failure.
NETWORK_ERRORS = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
                  "Name or service not known", "Network is unreachable", "ConnectTimeoutError", "Read timed out",
                  "Connection refused", "ProxyError", "Max retries exceeded", "Could not resolve", "Failed to fetch",
                  "Unable to fetch some archives", "connection broken by")


def unavailable(tier: str, what: str, output: str) -> None:
    """A tier's build step failed: skip when the failure is an unreachable package index, else fail with its error."""
    if any(marker in output for marker in NETWORK_ERRORS):
        pytest.skip(f"{tier}: {INDEX_UNREACHABLE}: `{what}`: {pip_error(output)}")
    pytest.fail(f"{tier}: `{what}` failed although the package index answered: {pip_error(output)}\n"
                f"{output[-3000:]}", pytrace=False)


def debian_package(tier: str, package: str, installed: Callable[[], bool]) -> None:
    """A system package a tier needs, from Debian's index as root when `installed()` says it is missing (once per
    machine). Skips only when that index cannot be reached; no root apt-get, or any other failure, fails the tier."""
    if installed():
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.fail(f"{tier}: Debian's `{package}` is not installed and there is no root apt-get to install it: "
                    f"install it (or your system's equivalent) and run the tests again", pytrace=False)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", package]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env)
        if done.returncode:
            unavailable(tier, " ".join(argv), done.stderr + done.stdout)
    if not installed():
        pytest.fail(f"{tier}: apt-get installed {package}, and it is still not found", pytrace=False)


def pip_error(text: str) -> str:
    """pip's ERROR lines (its last line is often only a help link), else the last line it printed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")][-3:]
    return " / ".join(errors) if errors else (lines[-1] if lines else "(no output)")


def build_step(argv: list[str], what: str, venv: Path, deadline: float, spec: PeerVenv) -> None:
    """Run one build command; a failure removes the partial venv, then skips (no index) or fails (anything else)."""
    try:
        proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=subprocess_env(),
                              timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        shutil.rmtree(venv, ignore_errors=True)
        pytest.fail(f"{spec.name} venv not built: `{what}` did not finish within the "
                    f"{spec.build_timeout_s:.0f} s build limit", pytrace=False)
    if proc.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        unavailable(f"{spec.name} tier", what, proc.stderr + proc.stdout)


def ensure_venv(spec: PeerVenv, venv: Path) -> Path:
    pins = spec.pins_text()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        python = venv / "bin" / "python"
        if (venv / READY).is_file() and (venv / READY).read_text() == pins and python.exists():
            return python
        if venv.exists():
            ours = (venv / BUILDING).exists() or (venv / READY).exists() or not any(venv.iterdir())
            if not ours:
                pytest.fail(f"{venv} exists but was not built by these tests; remove it or set "
                            f"{spec.env_var} to another path")
            shutil.rmtree(venv)
        deadline = time.monotonic() + spec.build_timeout_s
        venv.mkdir()
        (venv / BUILDING).write_text(pins)
        build_step([sys.executable, "-m", "venv", str(venv)], f"{sys.executable} -m venv", venv, deadline, spec)
        constraints = venv / f"{spec.name}-constraints.txt"
        constraints.write_text("\n".join(spec.constraints) + "\n")
        torch_pin = next((c for c in spec.constraints if c.startswith("torch==")), None)
        for step in spec.steps:
            what = f"pip install {' '.join(step)}"
            if torch_pin and any(arg.startswith("torch==") for arg in step):
                what += f" (as {torch_pin}: a local wheel via pip's find-links, or PyTorch's CPU index)"
            build_step([str(python), "-m", "pip", "install", "--timeout", "60", "--retries", "2",
                        "-c", str(constraints), *step], what, venv, deadline, spec)
        (venv / READY).write_text(pins)
        (venv / BUILDING).unlink()
        return python


def run_probe(python: Path, script: Path, *args: object, cwd: Path, timeout_s: float = 600,
              env: dict[str, str] | None = None) -> dict:
    """Run a probe script under a peer venv; it prints one JSON object on stdout."""
    proc = subprocess.run([str(python), str(script), *map(str, args)], check=False, capture_output=True,
                          text=True, cwd=cwd, env=subprocess_env(HF_HOME=str(cwd / "hf-home"), **(env or {})),
                          timeout=timeout_s)
    assert proc.returncode == 0, f"{script.name} exited {proc.returncode}:\n{proc.stderr[-6000:]}"
    return json.loads(proc.stdout)
