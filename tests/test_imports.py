"""Start-up hygiene (issue 16): each command imports only what it uses. `python -X importtime` runs every
command on a small drafter and the test fails when a heavy module is imported where it is not needed:
torch anywhere (the `.bin` reader is torch-free), huggingface_hub on local paths (only the Hub needs it),
jsonschema where no schema violation is worded (a valid config is decided by schemas.quick; jsonschema words
the violations of an invalid one), pydantic where no registry is opened and no config value needs its coercion
or its error (drafter.DrafterConfig is a plain model; its pydantic twin is imported for those only), gguf
unless converting to or from GGUF, tqdm off a terminal (progress bars are drawn on a TTY only). Imports are
checked, never timings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builders import build_drafter

REPO = Path(__file__).resolve().parent.parent
EAGLE_BIN_DIR = REPO / "tests" / "data" / "eagle-original" / "checkpoint"  # original EAGLE: pytorch_model.bin

HEAVY = ("torch", "huggingface_hub", "jsonschema", "tqdm", "numpy", "pydantic", "gguf")
# What each command may import of HEAVY (everything else is a failure).
ALLOWED = {
    "--help": set(),
    "convert --help": set(),
    "inspect": set(),  # the schema is checked (schemas.quick: valid), the config read as a plain model
    "inspect .bin": set(),
    "validate": {"pydantic"},  # the registry lookup (records -> registry: pydantic models); no jsonschema
    "validate .bin": {"pydantic"},
    "convert": {"pydantic"},  # the registry records it; no schema is checked, no Hub, no terminal: no tqdm
    "convert .bin": {"pydantic"},
    "registry list": {"pydantic"},
}


def imported_modules(*argv: str, cwd: Path) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), EAGLE3_CONVERT_REGISTRY=str(cwd / "registry.db"))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "eagle3_convert", *argv], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # validate exits 1 on findings: it still ran
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def heavy(modules: set[str]) -> set[str]:
    return {top for top in HEAVY for m in modules if re.fullmatch(rf"{top}(\..*)?", m)}


@pytest.fixture(scope="module")
def drafters(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imports")
    build_drafter(root / "st", "speculators")
    return root


@pytest.mark.parametrize("command", list(ALLOWED))
def test_a_command_imports_no_heavy_module_it_does_not_use(command: str, drafters: Path, tmp_path: Path) -> None:
    src = EAGLE_BIN_DIR if command.endswith(".bin") else drafters / "st"
    argv = {"--help": ["--help"], "convert --help": ["convert", "--help"], "registry list": ["registry", "list"]}.get(
        command)
    if argv is None:
        verb = command.split()[0]
        argv = ([verb, str(src)] if verb != "convert" else
                ["--to", "sglang", "--verifier", "org/target", str(src), str(tmp_path / "out")])
    unexpected = heavy(imported_modules(*argv, cwd=tmp_path)) - ALLOWED[command]
    assert not unexpected, f"`eagle3-convert {' '.join(argv)}` imported {sorted(unexpected)}"


def test_the_import_check_sees_a_heavy_import(drafters: Path, tmp_path: Path) -> None:
    """The check is live: a config that breaks its layout's schema gets jsonschema's words, so jsonschema is
    imported then (and inspect imports it too)."""
    broken = tmp_path / "broken"
    shutil.copytree(drafters / "st", broken)
    config = json.loads((broken / "config.json").read_text())
    config["speculators_version"] = 9  # the schema says a string
    (broken / "config.json").write_text(json.dumps(config))
    for verb in ("validate", "inspect"):
        assert "jsonschema" in heavy(imported_modules(verb, str(broken), cwd=tmp_path)), verb
