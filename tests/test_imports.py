"""Start-up hygiene (issue 16, issue 20): each command imports only what it uses. `python -X importtime` runs every
command on a small drafter and the test fails when a heavy module is imported where it is not needed:
torch anywhere (the `.bin` reader is torch-free), huggingface_hub on local paths (only the Hub needs it),
gguf unless converting to or from GGUF, tqdm off a terminal (progress bars are drawn on a TTY only), numpy
where no tensor is computed. pydantic (the models) and jsonschema (the config schemas) are the project's own
libraries and may be imported by every command that reads a checkpoint; `--help` imports neither. Imports
are checked, never timings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import build_drafter

REPO = Path(__file__).resolve().parent.parent
EAGLE_BIN_DIR = REPO / "tests" / "data" / "eagle-original" / "checkpoint"  # original EAGLE: pytorch_model.bin

HEAVY = ("torch", "transformers", "huggingface_hub", "jsonschema", "tqdm", "numpy", "pydantic", "gguf")
# What each command may import of HEAVY (everything else is a failure).
MODELS, SCHEMAS = {"pydantic"}, {"pydantic", "jsonschema"}
ALLOWED = {
    "--help": set(),
    "convert --help": set(),
    "verify --help": set(),  # torch and transformers only once verify runs
    "inspect": SCHEMAS,  # the config is checked against its layout's schema and read into the canonical model
    "inspect .bin": SCHEMAS,
    "validate": SCHEMAS,
    "validate .bin": SCHEMAS,
    "convert": MODELS,  # the registry is opened, asked and written; no schema, no Hub, no tqdm
    "convert .bin": MODELS,
    "registry list": MODELS,
}
RECORDS = ("eagle3_convert.registry.store", "eagle3_convert.registry.models", "eagle3_convert.records")


def imported_modules(*argv: str, cwd: Path, with_stdout: bool = False) -> Any:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), EAGLE3_CONVERT_REGISTRY=str(cwd / "registry.db"))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "eagle3_convert", *argv], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # validate exits 1 on findings: it still ran
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return (modules, done.stdout) if with_stdout else modules


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
    argv = {"--help": ["--help"], "convert --help": ["convert", "--help"], "verify --help": ["verify", "--help"],
            "registry list": ["registry", "list"]}.get(command)
    if argv is None:
        verb = command.split()[0]
        argv = ([verb, str(src)] if verb != "convert" else
                ["--to", "sglang", "--verifier", "org/target", str(src), str(tmp_path / "out")])
    unexpected = heavy(imported_modules(*argv, cwd=tmp_path)) - ALLOWED[command]
    assert not unexpected, f"`eagle3-convert {' '.join(argv)}` imported {sorted(unexpected)}"


def test_the_import_check_sees_a_heavy_import(drafters: Path, tmp_path: Path) -> None:
    """The check is live: inspect reads the config into the pydantic model, and the check sees pydantic."""
    assert "pydantic" in heavy(imported_modules("inspect", str(drafters / "st"), cwd=tmp_path))


def test_validate_without_a_registry_asks_no_registry(drafters: Path, tmp_path: Path) -> None:
    """No registry file: validate checks that it is missing and imports no store, no record model (and creates
    no file). Nor the convert pipeline: its hints plan a conversion only when they name one (hints.py)."""
    modules = imported_modules("validate", str(drafters / "st"), cwd=tmp_path)
    assert not modules.intersection(RECORDS) and not heavy(modules) - SCHEMAS, sorted(modules.intersection(RECORDS))
    assert "eagle3_convert.validate.report" in modules and "eagle3_convert.convert" not in modules
    assert not (tmp_path / "registry.db").exists()


def test_convert_no_record_without_a_registry_asks_no_registry(drafters: Path, tmp_path: Path) -> None:
    modules = imported_modules("--to", "sglang", "--no-record", str(drafters / "st"), str(tmp_path / "out"),
                               cwd=tmp_path)
    assert not modules.intersection(RECORDS) and not heavy(modules) - MODELS
    assert (tmp_path / "out" / "config.json").exists() and not (tmp_path / "registry.db").exists()


def test_a_registry_is_read_and_written_without_a_heavy_module(drafters: Path, tmp_path: Path) -> None:
    """With a registry: convert opens it before the copy, asks it for SRC's capture layers and records the
    conversion after the copy; validate finds the record (here one that names other layers than the config: the
    finding quotes it, so the record was read). Neither imports anything heavy but the models (and validate
    the schemas): no Hub client, no tqdm, no numpy."""
    src = tmp_path / "src"
    shutil.copytree(drafters / "st", src)
    modules = imported_modules("--to", "sglang", str(src), str(tmp_path / "out"), cwd=tmp_path)
    assert "eagle3_convert.records" in modules and not heavy(modules) - MODELS, sorted(heavy(modules))
    assert (tmp_path / "registry.db").exists() and (tmp_path / "out" / "config.json").exists()
    env = {**os.environ, "PYTHONPATH": str(REPO), "EAGLE3_CONVERT_REGISTRY": str(tmp_path / "registry.db")}
    claimed = subprocess.run([sys.executable, "-m", "eagle3_convert", "registry", "add", str(src), "--capture-layers",
                              "1,2,3", "--convention", "boundary"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
    assert claimed.returncode == 0, claimed.stderr
    for checked in (src, tmp_path / "out"):
        modules, stdout = imported_modules("validate", str(checked), cwd=tmp_path, with_stdout=True)
        assert "the registry's record of drafter" in stdout, stdout  # the record was read, and it disagrees
        assert not heavy(modules) - SCHEMAS, (checked, sorted(heavy(modules)))


# What inspect and header-level validate of a local safetensors drafter, with no registry, never load, with why.
# Read from sys.modules at exit, which also sees what importlib.import_module loads (the layouts, pydantic's
# lazy submodules): `-X importtime` above logs only `import` statements.
NOT_ON_THE_HEADER_PATH = {
    "numpy": "decodes tensor data: --deep and GGUF only",
    "gguf": "llama.cpp's package: a GGUF written with --target-gguf",
    "huggingface_hub": "the Hub: a repo id, publish, sync",
    "tqdm": "progress bars, on a terminal",
    "torch": "the .bin reader's fallback and verify",
    "transformers": "verify",
    "sqlite3": "an existing registry",
    "concurrent.futures": "--deep's and convert's threads",
    "eagle3_convert.records": "an existing registry",
    "eagle3_convert.registry.store": "an existing registry",
    "eagle3_convert.registry.models": "an existing registry",
    "eagle3_convert.registry.postgres": "a postgresql:// registry",
    "eagle3_convert.hub_read": "a Hub repo read without downloading it (registry add, sync)",
    "eagle3_convert.hub_index": "sync and search",
    "eagle3_convert.publish": "publish",
    "eagle3_convert.model_card": "publish",
    "eagle3_convert.bin_reader": "a pytorch_model.bin",
    "eagle3_convert.torch_zip": "a pytorch_model.bin",
    "eagle3_convert.verify": "verify",
    "eagle3_convert.verify_inputs": "verify",
}
SHOW_MODULES_AT_EXIT = ("import atexit, sys\n"
                        "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
                        "from eagle3_convert.cli import main\nmain()\n")


@pytest.mark.parametrize("verb", ["inspect", "validate"])
def test_the_header_path_loads_nothing_it_does_not_read(verb: str, drafters: Path, tmp_path: Path) -> None:
    """inspect / header-level validate of a local safetensors drafter load the layouts, the engines, pydantic and
    jsonschema, and none of NOT_ON_THE_HEADER_PATH (validate not the convert pipeline either: hints.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), EAGLE3_CONVERT_REGISTRY=str(tmp_path / "registry.db"))
    done = subprocess.run([sys.executable, "-c", SHOW_MODULES_AT_EXIT, verb, str(drafters / "st")], cwd=tmp_path,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    modules = set(done.stderr.rsplit("MODULES ", 1)[1].split())
    assert {"eagle3_convert.converters.eagle", "jsonschema", "pydantic"} <= modules  # live: an import_module'd layout
    loaded = {name: why for name, why in NOT_ON_THE_HEADER_PATH.items()
              if name in modules or any(m.startswith(name + ".") for m in modules)}
    assert not loaded, f"`eagle3-convert {verb}` of a local safetensors drafter loaded {loaded}"
    assert verb == "inspect" or "eagle3_convert.convert" not in modules


def test_inspect_and_validate_start_no_thread_pool(drafters: Path, tmp_path: Path) -> None:
    """Threads (concurrent.futures, with logging and queue) are for --deep and convert's copy only."""
    for verb in ("inspect", "validate"):
        modules = imported_modules(verb, str(drafters / "st"), cwd=tmp_path)
        assert "eagle3_convert.validate.deep" in modules and "concurrent.futures" not in modules, verb


PYDANTIC_PLUGIN = '''
import sys


class Plugin:
    def new_schema_validator(self, *args, **kwargs):
        return None, None, None


plugin = Plugin()
sys.stderr.write("acme pydantic plugin loaded\\n")
'''


@pytest.mark.parametrize("declared", [True, False])
def test_a_pydantic_plugin_a_package_declares_is_still_loaded(declared: bool, drafters: Path, tmp_path: Path) -> None:
    """The CLI skips pydantic's plugin lookup (every installed package's metadata) only where no package declares
    the `pydantic` entry-point group: a declared plugin is loaded as pydantic always did, an undeclared module not."""
    site = tmp_path / "site"
    dist = site / "acme_pydantic-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "acme_pydantic_plugin.py").write_text(PYDANTIC_PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-pydantic\nVersion: 1.0\n")
    if declared:
        (dist / "entry_points.txt").write_text("[pydantic]\nacme = acme_pydantic_plugin:plugin\n")
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
               EAGLE3_CONVERT_REGISTRY=str(tmp_path / "registry.db"))
    done = subprocess.run([sys.executable, "-m", "eagle3_convert", "inspect", str(drafters / "st")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("acme pydantic plugin loaded" in done.stderr) == declared, done.stderr[-2000:]
