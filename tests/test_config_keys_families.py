"""A key that a real model family's config class defines is no misspelling of ours (issue 34).

AngelSlim's EAGLE-3 drafter for Hunyuan-1.8B (its configs/hunyuan-1.8b-eagle3.json: the vLLM-native layout, the
target's Hunyuan fields carried, `eod_token_id` among them) was refused by every command: `eod_token_id is no vllm
config key: did you mean 'ptd_token_id'?` (E-CONFIG-KEY-TYPO), once P-EAGLE's `ptd_token_id` joined the keys vLLM
reads. The published file could not be fetched here: the fixture is AngelSlim's vLLM-native config as
tests/data/real-configs/angelslim-qwen3-8b-eagle3.json spells it, at the builder's size, with Hunyuan's token fields
(transformers' HunYuanDenseV1Config: bos/eos/pad/eod_token_id). The product reads the list of transformers' config
attributes shipped in eagle3_convert/converters/model_config_keys.txt (tools/model_config_keys.py); this test
derives the names from transformers' classes themselves.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter
from conftest import run_cli

from eagle3_convert.converters.config_keys import model_config_keys

HUNYUAN_TOKENS = {"bos_token_id": 127958, "eos_token_id": 127960, "pad_token_id": 127961, "eod_token_id": 127967}


def angelslim_hunyuan(dest: Path, **extra) -> Path:
    src = build_drafter(dest, "vllm", DrafterSpec())
    config = json.loads((src / "config.json").read_text())
    config.update(architectures=["Eagle3LlamaForCausalLM"], **HUNYUAN_TOKENS, **extra)
    (src / "config.json").write_text(json.dumps(config, indent=2))
    return src


def test_a_hunyuan_drafters_own_token_field_is_no_typo(tmp_path: Path) -> None:
    src = angelslim_hunyuan(tmp_path / "hunyuan")
    done = run_cli("validate", "--json", src)
    findings = json.loads(done.stdout)["findings"]
    assert done.exit_code == 0 and not [f for f in findings if f["code"].startswith("E-")], findings
    [said] = [f for f in findings if f["where"] == "$.eod_token_id"]
    assert said["code"] == "W-CONFIG-KEY-UNKNOWN" and "field of transformers' model configs" in said["message"]
    for to in ("sglang", "vllm", "speculators"):
        converted = run_cli("--no-record", "--verifier", "tencent/Hunyuan-1.8B-Instruct", "--to", to, src,
                            tmp_path / f"out-{to}")
        assert converted.exit_code == 0, (to, converted.stderr)


@pytest.mark.parametrize("key, guess", [("ptd_token_idd", "ptd_token_id"), ("hidden_sizes", "hidden_size"),
                                        ("architecture", "architectures")])
def test_a_near_miss_is_still_an_error_where_no_family_defines_it_or_the_decoder_needs_the_key(
        tmp_path: Path, key: str, guess: str) -> None:
    """`ptd_token_idd` is no family's field; `hidden_sizes` and `architecture` are (ResNet's, some vision configs'),
    but the key they resemble is one every reader needs, and the config lacks it."""
    src = angelslim_hunyuan(tmp_path / "typo")
    config = json.loads((src / "config.json").read_text())
    config[key] = config.pop(guess, 7)
    (src / "config.json").write_text(json.dumps(config))
    done = run_cli("validate", "--from", "vllm", src)  # (without architectures no layout is detected)
    assert done.exit_code == 1 and f"did you mean {guess!r}?" in done.stdout + done.stderr, done.stdout
    refused = run_cli("--no-record", "--from", "vllm", "--to", "sglang", src, tmp_path / "out")
    assert refused.exit_code == 1 and "[E-CONFIG-KEY-TYPO]" in refused.stderr, refused.stderr


def test_the_shipped_list_holds_the_fields_transformers_config_classes_define() -> None:
    """The list the product reads against transformers itself, for the families drafters are trained for."""
    import transformers
    from transformers import DeepseekV3Config, HunYuanDenseV1Config, LlamaConfig, Qwen3Config, Qwen3MoeConfig

    shipped = model_config_keys()
    for cls in (HunYuanDenseV1Config, LlamaConfig, Qwen3Config, Qwen3MoeConfig, DeepseekV3Config):
        names = set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs"}
        names |= {k for k in cls().to_dict() if k.isidentifier()}
        assert names <= shipped, (cls.__name__, sorted(names - shipped))
    header = (Path(__file__).resolve().parent.parent / "eagle3_convert" / "converters" /
              "model_config_keys.txt").read_text().splitlines()[0]
    assert header.startswith(f"# transformers {transformers.__version__}:"), header
