"""What a new user hit (issue 34, item 5), each through the real CLI: a target model given as the drafter, a mistyped
local path, `-q`, `inspect --from`'s help, and `--help` on the four ways of naming the target."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import DATA, EXAMPLE, run_cli

TARGET = DATA / "verify-tiny" / "target"  # a plain transformers LlamaForCausalLM: config.json and its weights


@pytest.mark.parametrize("argv", [["validate"], ["validate", "--from", "sglang"], ["inspect"],
                                  ["inspect", "--from", "vllm"], ["--to", "vllm"], ["--from", "sglang", "--to", "vllm"],
                                  ["registry", "add"]])
def test_a_target_model_given_as_the_drafter_is_named_as_such(argv: list[str], tmp_path: Path):
    """It used to get 'pass --from with one of ...', and with --from eight errors about a drafter it is not."""
    converting = "--to" in argv
    extra = ["--no-record", TARGET, tmp_path / "out"] if converting else [TARGET]
    if argv[0] == "registry":
        extra += ["--registry", tmp_path / "reg.db"]
    result = run_cli(*argv, *extra)
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert (f"{TARGET}: this is a target model, not a drafter (architectures ['LlamaForCausalLM'], 8 layers, no "
            "fc.weight) [E-SRC-IS-TARGET] — hint: pass the EAGLE-3 drafter's directory as SRC"
            ) in result.stderr.strip().splitlines()[-1], result.stderr
    if argv[0] in ("validate", "inspect"):
        found = json.loads(run_cli(*argv, "--json", TARGET).stdout)["findings"]
        assert [f["code"] for f in found if f["severity"] == "error"] == ["E-SRC-IS-TARGET"]
    assert not (tmp_path / "out").exists()


def test_a_drafter_is_no_target_model_however_broken(tmp_path: Path):
    """Only the decoder stack without fc reads as a target: a drafter whose config names no known layout is still
    told to name one."""
    src = tmp_path / "drafter"
    shutil.copytree(EXAMPLE, src)
    (src / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    result = run_cli("validate", src)
    assert "[E-LAYOUT-UNKNOWN]" in result.stderr and "E-SRC-IS-TARGET" not in result.stderr


@pytest.mark.parametrize("spec, near", [("./models/drafter-typo", "models/drafter"), ("models/draftr", "models/drafter"),
                                        ("models/x/y", None), ("../nope", None)])
def test_a_mistyped_local_path_is_no_such_directory(spec: str, near: str | None, tmp_path: Path, monkeypatch):
    """A path beside a folder that exists is a local path mistyped: 'no such directory' (the nearest name there), not
    E-HUB-OFFLINE. `models/draftr` has a repo id's shape and is still asked of the Hub (here offline): both readings
    are said, the local one first."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    shutil.copytree(EXAMPLE, tmp_path / "models" / "drafter")
    for argv in (["validate", spec], ["inspect", spec], ["--to", "vllm", "--no-record", spec, "out"]):
        result = run_cli(*argv)
        [line] = result.stderr.strip().splitlines()
        assert result.exit_code == 1 and line.startswith(f"error: {spec}: no such directory"), line
        assert "[E-SRC-MISSING]" in line and "E-HUB" not in line, line
        assert (f"(did you mean {near}?)" in line) == (near is not None), line
        assert ("as a Hub repo id" in line) == (spec == "models/draftr"), line


def test_quiet_quiets_the_engine_table_too(tmp_path: Path):
    loud = run_cli("--to", "sglang", "--no-record", EXAMPLE, tmp_path / "loud")
    quiet = run_cli("--to", "sglang", "--no-record", "-q", EXAMPLE, tmp_path / "quiet")
    assert loud.exit_code == quiet.exit_code == 0
    table = [line for line in loud.stdout.splitlines() if line.startswith("  ")]
    assert table and "SGLang" in "\n".join(table)
    assert not [line for line in quiet.stdout.splitlines() if line.startswith("  ")], quiet.stdout
    assert quiet.stdout.startswith(f"wrote {tmp_path / 'quiet'} (sglang)") and quiet.stderr == ""


def test_quiet_still_says_an_engine_that_would_serve_the_output_wrong(tmp_path: Path):
    """llama.cpp ignores norm_output: its wrong verdict is a warning the user needs, -q or not."""
    from builders import DrafterSpec, build_drafter

    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(norm_output=True))
    quiet = run_cli("--to", "vllm", "--no-record", "-q", src, tmp_path / "out")
    assert quiet.exit_code == 0, quiet.stderr
    shown = [line for line in quiet.stdout.splitlines() if line.startswith("  ")]
    assert shown and all("WRONG" in line for line in shown if not line.startswith("      ")), shown


def test_inspect_from_has_help():
    out = run_cli("inspect", "--help").stdout
    block = out[out.index("--from"):out.index("--target")]
    assert "Read SRC as this layout instead of detecting it" in " ".join(block.split())


def test_help_says_what_each_target_option_is_for():
    """A newcomer read the README and still missed which of the four to pass: `--help` says it, one line each."""
    out = run_cli("--help").stdout
    lines = {flag: [line for line in out.splitlines() if line.strip().startswith(flag + " ")]
             for flag in ("--verifier", "--target", "--target-model", "--target-gguf")}
    assert all(len(found) == 1 for found in lines.values()), lines
    assert "name" in lines["--verifier"][0] and "config.json" in lines["--target"][0]
    assert "verify" in lines["--target-model"][0] and "GGUF" in lines["--target-gguf"][0]
    for flag, command in (("--verifier", "convert"), ("--target", "validate"), ("--target-model", "verify"),
                          ("--target-gguf", "convert")):  # each is an option of the command it is named for
        assert re.search(rf"(?m)^\s+{flag}\b", run_cli(command, "--help").stdout), (flag, command)
