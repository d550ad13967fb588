"""verify checks what it is given before torch and transformers load (issue 36): a wrong argument, path, target
file or device is one line, with its code and a hint, while neither library is in sys.modules.

Each case runs the real CLI in a fresh interpreter (`python -c`), which writes its sys.modules at exit: the error
ends the command, so what is not loaded then was not loaded when the error was raised. (In this test session torch
is imported already; only a fresh process can tell.) How long an error takes is benchmarks' to measure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA

REPO = Path(__file__).resolve().parent.parent
FIXTURE = DATA / "verify-tiny"
SHOW_MODULES_AT_EXIT = ("import atexit, sys\n"
                        "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules))"
                        " + '\\n'))\nfrom eagle3_convert.cli import main\nmain()\n")


def verify_in_a_fresh_process(*args: object, cwd: Path) -> tuple[int, str, set[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), EAGLE3_CONVERT_REGISTRY=str(cwd / "registry.db"))
    done = subprocess.run([sys.executable, "-c", SHOW_MODULES_AT_EXIT, "verify", *map(str, args)], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    said, modules = done.stderr.rsplit("\nMODULES ", 1)
    return done.returncode, said.strip(), set(modules.split())


def target_copy(dest: Path, *, drop: tuple[str, ...] = (), config: dict | None = None) -> Path:
    """The fixture's target, less the files named in `drop`, its config.json changed by `config`."""
    dest.mkdir()
    for file in (FIXTURE / "target").iterdir():
        if file.name not in drop:
            shutil.copy(file, dest / file.name)
    if config:
        data = json.loads((dest / "config.json").read_text())
        (dest / "config.json").write_text(json.dumps({**data, **config}))
    return dest


def cuda_possible() -> bool:
    import importlib.util

    version = Path(importlib.util.find_spec("torch").origin).with_name("version.py").read_text()
    return "cuda = None" not in version.replace(": Optional[str]", "") or Path("/dev/nvidiactl").exists()


CASES = {
    "no such target": (lambda tmp: ("--target-model", tmp / "nowhere"), "E-TARGET-MISSING", "no such directory"),
    "no config.json": (lambda tmp: ("--target-model", target_copy(tmp / "t", drop=("config.json",))),
                       "E-TARGET-MISSING", "no config.json"),
    "no weights": (lambda tmp: ("--target-model", target_copy(tmp / "t", drop=("model.safetensors",))),
                   "E-TARGET-MISSING", "no weights"),
    "no tokenizer": (lambda tmp: ("--target-model", target_copy(tmp / "t", drop=("tokenizer.json",
                                                                                  "tokenizer_config.json"))),
                     "E-TARGET-MISSING", "no tokenizer"),
    "config without sizes": (lambda tmp: ("--target-model", target_copy(tmp / "t", config={"hidden_size": None})),
                             "E-VERIFY-TARGET", "no integer hidden_size"),
    "another width": (lambda tmp: ("--target-model", target_copy(tmp / "t", config={"hidden_size": 64})),
                      "E-VERIFY-WIDTH", "hidden_size is 64 but the drafter fuses states of width 48"),
    "another vocabulary": (lambda tmp: ("--target-model", target_copy(tmp / "t", config={"vocab_size": 50})),
                           "E-VERIFY-VOCAB", "has 50 tokens but the drafter's has 49"),
    "too shallow": (lambda tmp: ("--target-model", target_copy(tmp / "t", config={"num_hidden_layers": 4})),
                    "E-VERIFY-CAPTURE", "boundaries [5] lie outside the 4-layer target"),
    "no such drafter": (lambda tmp: ("--target-model", FIXTURE / "target", "--drafter-is", tmp / "nowhere"),
                        "E-SRC-MISSING", "no such directory"),
    "no such prompts": (lambda tmp: ("--target-model", FIXTURE / "target", "--prompts", tmp / "none.txt"),
                        "E-USAGE", "cannot read it"),
    "k 0": (lambda tmp: ("--target-model", FIXTURE / "target", "-k", "0"), "E-USAGE", "-k"),
    "threads 0": (lambda tmp: ("--target-model", FIXTURE / "target", "--threads", "0"), "E-USAGE", "--threads"),
    "no such device": (lambda tmp: ("--target-model", FIXTURE / "target", "--device", "tpu"), "E-USAGE",
                       "--device"),
    "no CUDA": (lambda tmp: ("--target-model", FIXTURE / "target", "--device", "cuda"), "E-VERIFY-DEVICE",
                "--device cuda:"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_error_comes_before_torch_loads(case: str, tmp_path: Path):
    pytest.importorskip("torch")  # with torch missing, E-VERIFY-DEPS comes first (test_verify_cli)
    if case == "no CUDA" and cuda_possible():
        pytest.skip("torch here may reach a GPU: --device cuda is no error before it loads")
    args, code, says = CASES[case]
    given = list(args(tmp_path))
    drafter = FIXTURE / "drafter"
    if "--drafter-is" in given:  # the drafter argument itself is the wrong one
        drafter = given.pop(given.index("--drafter-is") + 1)
        given.remove("--drafter-is")
    exit_code, said, modules = verify_in_a_fresh_process(drafter, *given, "--no-record", cwd=tmp_path)
    assert exit_code != 0
    [line] = said.splitlines()
    assert f"[{code}]" in line and "hint:" in line and says in line, line
    loaded = {"torch", "transformers"} & {m.split(".")[0] for m in modules}
    assert not loaded, f"{case}: {sorted(loaded)} imported before the error"
    assert "eagle3_convert.cli.verify" in modules  # live: the command ran
