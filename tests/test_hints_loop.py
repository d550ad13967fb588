"""Hints that looped (issue 34), each through the real CLI: the command a hint names is run as a user pastes it, and
the file it wrote checked again with the same options; the finding the hint was for is gone, or the hint names no
such command. The whole corpus is held to the same rule in tests/test_hints_rerun.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from builders import DrafterSpec, build_drafter
from conftest import DATA, EXAMPLE, run_cli
from test_hints import COMMAND, run_hint

from eagle3_convert.hints import ALTERNATIVES

REFUSAL = re.compile(r"\[(E-[A-Z0-9-]+)\] — hint: (.*)$")


def engine_findings(path: Path, *options: str) -> list[dict]:
    out = json.loads(run_cli("validate", "--json", *options, path).stdout)
    return [f for f in out["findings"] if f["code"].startswith("E-ENGINE")]


def refused(*argv: str | Path) -> tuple[str, str]:
    """The code and hint of a command's one-line refusal."""
    result = run_cli(*argv)
    assert result.exit_code != 0, result.stdout
    found = REFUSAL.search(result.stderr.strip().splitlines()[-1])
    assert found, result.stderr
    return found[1], found[2]


def test_an_mla_drafter_on_a_release_that_refuses_its_class_is_told_to_upgrade_not_to_rewrite_it(tmp_path: Path):
    """SGLang 0.5.11 builds no Eagle3DeepseekV2ForCausalLM. The hint offered `--to sglang`, whose output names the same
    class, so 0.5.11 refused it alike: the hint now offers only what works for that release."""
    src = build_drafter(tmp_path / "kimi", "sglang", DrafterSpec(family="deepseek_mla", target_model_type="kimi_k2"))
    assert json.loads((src / "config.json").read_text())["architectures"] == ["Eagle3DeepseekV2ForCausalLM"]
    [finding] = engine_findings(src, "--engine", "sglang==0.5.11")
    assert finding["code"] == "E-ENGINE-REFUSES"
    assert finding["hint"] == "upgrade to SGLang ≥ 0.5.12, which serves this file as trained"
    # what the hint used to offer, run: the release still refuses what it writes
    assert run_cli("--to", "sglang", "--no-record", src, tmp_path / "rewritten").exit_code == 0
    assert [f["code"] for f in engine_findings(tmp_path / "rewritten", "--engine", "sglang==0.5.11")] == [
        "E-ENGINE-REFUSES"]
    assert engine_findings(src, "--engine", "sglang==0.5.12") == []  # the release the hint names serves it


def test_a_conversion_offered_for_one_release_is_judged_for_it_and_fixes_it(tmp_path: Path):
    """Where the engine's own layout does fix the release's fault (SGLang before 0.5.12 drops layers.0.* names, which
    the sglang layout writes as midlayer.*), the hint names the release, and its command's output serves there."""
    src = build_drafter(tmp_path / "drafter", "modelopt", DrafterSpec())
    [finding] = engine_findings(src, "--engine", "sglang==0.5.11")
    assert finding["code"] == "E-ENGINE-WRONG", finding
    upgrade, rewrite = finding["hint"].split(ALTERNATIVES)
    assert upgrade.startswith("upgrade to SGLang ≥ 0.5.12")
    [command] = COMMAND.findall(rewrite)
    assert "--engine sglang==0.5.11 --to sglang" in command
    code, err = run_hint(command, src, str(src), tmp_path / "out")
    assert code == 0, err
    assert engine_findings(tmp_path / "out" / "drafter-sglang", "--engine", "sglang==0.5.11") == []


def test_an_eagle3_drafter_sent_to_the_dflash_layout_is_told_which_layouts_hold_it(tmp_path: Path):
    """'convert it to its own layout' named none: the hint names its own and vLLM's, and both convert."""
    src = build_drafter(tmp_path / "drafter", "sglang", DrafterSpec())
    code, hint = refused("--to", "dflash", "--no-record", src, tmp_path / "out")
    assert code == "E-KIND-UNSUPPORTED"
    assert hint == ("convert it to an EAGLE-3 layout: its own, sglang (`--to sglang`), or `--to vllm` (vLLM serves "
                    "every variant)")
    for layout in re.findall(r"`--to ([a-z]+)`", hint):
        assert run_cli("--to", layout, "--no-record", src, tmp_path / layout).exit_code == 0


def test_publish_speaks_of_the_flag_it_was_given(tmp_path: Path, monkeypatch):
    """publish --layout gguf without --target-gguf blamed `--to gguf`, a flag publish has not; its conversion's
    refusals say --layout (nothing is sent: the refusal comes before any Hub call)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run_cli("publish", "--layout", "gguf", "--token", "hf_unused", EXAMPLE, "org/drafter")
    assert result.exit_code == 2 and "[E-GGUF-TARGET]" in result.stderr
    assert "--to" not in result.stderr and "--target-gguf PATH" in result.stderr
    code, hint = refused("publish", "--layout", "dflash", "--token", "hf_unused", EXAMPLE, "org/drafter")
    assert code == "E-KIND-UNSUPPORTED" and "`--layout vllm`" in hint and "--to" not in hint


def test_convert_names_the_whole_repair_command_and_it_repairs(tmp_path: Path):
    """The hint was cut off ('eagle3-convert --repair-d2t-absolute ...'): it is now the command typed, repaired, and
    what it writes no longer holds absolute ids."""
    src = tmp_path / "h2"
    shutil.copytree(DATA / "h2-d2t-absolute" / "checkpoint", src)
    code, hint = refused("--to", "vllm", "--no-record", "--max-shard-size", "5GB", src, tmp_path / "out")
    assert code == "E-VOCAB-ABSOLUTE"
    [command] = COMMAND.findall(hint)
    assert command == (f"eagle3-convert --repair-d2t-absolute --to vllm --max-shard-size 5000000000 --no-record {src} "
                       f"{tmp_path / 'out'}")
    code, err = run_hint(command, src, str(src), tmp_path / "repaired")
    assert code == 0, err
    found = json.loads(run_cli("validate", "--json", tmp_path / "repaired" / "out").stdout)["findings"]
    assert not [f for f in found if f["code"] == "E-VOCAB-ABSOLUTE"]


def test_the_token_is_never_repeated_in_a_hint(tmp_path: Path):
    src = tmp_path / "h2"
    shutil.copytree(DATA / "h2-d2t-absolute" / "checkpoint", src)
    result = run_cli("--to", "vllm", "--no-record", "--token", "hf_secret_value", src, tmp_path / "out")
    assert result.exit_code == 1 and "hf_secret_value" not in result.stderr + result.stdout
