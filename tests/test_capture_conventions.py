"""Capture-id conventions per engine and target family, through the CLI (docs/formats.md §4.2), with the expected
ids written out here by hand from that table, not computed by our code:

| who | id x means |
|---|---|
| speculators, vLLM, original EAGLE | b = x |
| SGLang (default families), SpecForge, ModelOpt, TensorRT-LLM | b = x + 1; SGLang never reaches b = L |
| SGLang on DeepSeek-V2/V3, Kimi, GLM-4-MoE-Lite targets | +1 only when ids[0] == 1, else raw; -1 captures nothing |
| SGLang on gpt-oss targets | raw when max(ids) == L, else +1; b = L is reachable |

`inspect --target` shows one set of boundaries in every engine's spelling; converting an SGLang file to vLLM
shows how its ids were read (vLLM's ids are the boundaries). Tests found by mutation testing (issue 26): the
gpt-oss rule, the DeepSeek id 0, odd target depths and the engine-default table had no test that could fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import DrafterSpec, build_drafter, write_target
from conftest import run_cli

from eagle3_convert.capture_ids import a_layer_target

BOUNDARY = ("speculators", "vllm", "eagle")
BLOCK_OUTPUT = ("specforge", "modelopt", "trtllm")


def per_engine(boundary_ids, sglang, block_ids) -> dict:
    return {**{e: boundary_ids for e in BOUNDARY}, "sglang": sglang, **{e: block_ids for e in BLOCK_OUTPUT}}


# (target model_type, target depth L or None, the drafter's boundaries or None) -> target family, ids per engine
TABLE = [
    ("llama", 8, (2, 4, 7), "default", per_engine([2, 4, 7], [1, 3, 6], [1, 3, 6])),
    ("llama", 8, (2, 4, 8), "default", per_engine([2, 4, 8], "cannot express (E-CAPTURE-UNREACHABLE)", [1, 3, 7])),
    ("gpt_oss", 8, (2, 4, 8), "gpt_oss", per_engine([2, 4, 8], [1, 3, 7], [1, 3, 7])),
    ("deepseek_v3", 8, (2, 4, 7), "deepseek", per_engine([2, 4, 7], [1, 3, 6], [1, 3, 6])),
    ("deepseek_v3", 8, (3, 5, 6), "deepseek", per_engine([3, 5, 6], [3, 5, 6], [2, 4, 5])),
    ("deepseek_v3", 8, (0, 3, 5), "deepseek", per_engine([0, 3, 5], [0, 3, 5], [-1, 2, 4])),
    ("kimi_k2", 8, (1, 3, 6), "deepseek",
     per_engine([1, 3, 6], "cannot express (E-CAPTURE-UNEXPRESSIBLE)", [0, 2, 5])),
    ("llama", 9, None, "default", per_engine([2, 4, 6], [1, 3, 5], [1, 3, 5])),  # default {2, L//2, L-3}, L odd
    ("llama", None, None, "default", per_engine("engine default", "engine default", "engine default")),
]


@pytest.mark.parametrize("model_type, depth, boundaries, family, expected", TABLE,
                         ids=[f"{t[0]}-L{t[1]}-{list(t[2]) if t[2] else 'default'}" for t in TABLE])
def test_inspect_spells_the_boundaries_in_every_engines_convention(tmp_path: Path, model_type: str, depth, boundaries,
                                                                   family: str, expected: dict):
    spec = DrafterSpec(capture_boundaries=boundaries, target_layers=depth or 8, target_model_type=model_type)
    src = build_drafter(tmp_path / "drafter", "speculators", spec)
    target = ("--target", write_target(tmp_path / "target", spec)) if depth else ()
    result = run_cli("inspect", src, "--json", *target)
    assert result.exit_code == 0, result.stderr
    capture = json.loads(result.stdout)["drafter"]["capture"]
    assert capture["target_family"] == family
    assert capture["boundaries"] == (list(boundaries) if boundaries else "engine default")
    assert capture["per_engine"] == expected


def sglang_file(tmp_path: Path, ids: list[int], model_type: str, depth: int) -> tuple[Path, Path]:
    """A SpecForge/SGLang drafter whose eagle_config names `ids`, and its target's config."""
    spec = DrafterSpec(capture_boundaries=tuple(x + 1 for x in ids), target_layers=depth, target_model_type=model_type)
    src = build_drafter(tmp_path / "sglang", "sglang", spec)
    assert json.loads((src / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == ids
    return src, write_target(tmp_path / "target", spec)


READINGS = [  # (target model_type, L, SGLang ids as written) -> the boundaries SGLang captures
    ("llama", 8, [1, 3, 6], [2, 4, 7]),
    ("gpt_oss", 8, [1, 3, 8], [1, 3, 8]),  # max(ids) == L: raw
    ("gpt_oss", 8, [1, 3, 6], [2, 4, 7]),
    ("deepseek_v3", 8, [1, 3, 6], [2, 4, 7]),  # ids[0] == 1: +1
    ("deepseek_v3", 8, [0, 3, 5], [0, 3, 5]),  # raw: 0 is the embedding output, a valid capture
    ("glm4_moe_lite", 8, [2, 4, 5], [2, 4, 5]),
]


@pytest.mark.parametrize("model_type, depth, ids, boundaries", READINGS,
                         ids=[f"{r[0]}-L{r[1]}-{r[2]}" for r in READINGS])
def test_sglang_ids_are_read_as_sglang_reads_them(tmp_path: Path, model_type: str, depth: int, ids: list[int],
                                                  boundaries: list[int]):
    src, target = sglang_file(tmp_path, ids, model_type, depth)
    result = run_cli("--from", "sglang", "--to", "vllm", "--target", target, "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["eagle_aux_hidden_state_layer_ids"] == boundaries


@pytest.mark.parametrize("model_type, ids, code, says", [
    ("deepseek_v3", [-1, 3, 5], "E-CAPTURE-FIELD", "capture nothing"),  # -1 is no layer on this family
    ("llama", [1, 3, 8], "E-CAPTURE-RANGE", "[2, 4, 9]"),  # block 8 of an 8-layer target does not exist
])
def test_sglang_ids_that_capture_no_layer_are_refused(tmp_path: Path, model_type: str, ids: list[int], code: str,
                                                      says: str):
    src, target = sglang_file(tmp_path, ids, model_type, 8)
    result = run_cli("--from", "sglang", "--to", "vllm", "--target", target, "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1 and f"[{code}]" in result.stderr and says in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("to", ["vllm", "speculators", "sglang", "modelopt"])
def test_boundaries_beyond_the_targets_depth_are_refused(tmp_path: Path, to: str):
    """Boundary 9 of an 8-layer target is no layer: no engine captures it (vLLM once converted it, and said it
    would serve it as trained)."""
    spec = DrafterSpec(capture_boundaries=(2, 4, 9), target_layers=8)
    src = build_drafter(tmp_path / "src", "vllm", spec)
    target = write_target(tmp_path / "target", spec)
    result = run_cli("--to", to, "--target", target, "--verifier", spec.verifier, "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1 and "[E-CAPTURE-RANGE]" in result.stderr, result.stderr
    assert "[2, 4, 9]" in result.stderr and "8-layer target" in result.stderr
    assert not (tmp_path / "out").exists()


def test_what_sglang_cannot_capture_is_refused_naming_the_block(tmp_path: Path):
    spec = DrafterSpec(capture_boundaries=(2, 4, 8), target_layers=8)
    src = build_drafter(tmp_path / "src", "vllm", spec)
    result = run_cli("--to", "sglang", "--target", write_target(tmp_path / "target", spec), "--no-record", src,
                     tmp_path / "out")
    assert result.exit_code == 1 and "[E-CAPTURE-UNREACHABLE]" in result.stderr
    assert "boundary 8 (the output of block 7) on an 8-layer target" in result.stderr
    assert "hint: retrain the drafter on capturable layers, or serve it with vLLM" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("depth, article", [(8, "an"), (11, "an"), (18, "an"), (24, "a"), (80, "an"), (89, "an"),
                                            (90, "a"), (100, "a"), (118, "a"), (800, "an"), (1800, "a"),
                                            (8000, "an"), (11000, "an"), (180000, "a")])
def test_the_article_of_a_depth_is_the_one_its_number_is_said_with(depth: int, article: str):
    """'an 8-layer target', 'an 11-layer', 'an 80-layer', 'an 800-layer'; 'a 118-layer', 'a 1800-layer'."""
    assert a_layer_target(depth) == f"{article} {depth}-layer target"


def test_an_unknown_depth_is_any_target():
    assert a_layer_target(None) == "any target"


@pytest.mark.parametrize("depth, says", [(11, "on an 11-layer target"), (24, "on a 24-layer target")])
def test_the_unreachable_boundary_names_the_depth_with_its_article(tmp_path: Path, depth: int, says: str):
    spec = DrafterSpec(capture_boundaries=(2, 4, depth), target_layers=depth)
    src = build_drafter(tmp_path / "src", "vllm", spec)
    result = run_cli("--to", "sglang", "--target", write_target(tmp_path / "target", spec), "--no-record", src,
                     tmp_path / "out")
    assert result.exit_code == 1 and "[E-CAPTURE-UNREACHABLE]" in result.stderr, result.stderr
    assert f"boundary {depth} (the output of block {depth - 1}) {says}:" in result.stderr


def test_what_sglang_cannot_spell_on_a_deepseek_target_is_refused(tmp_path: Path):
    spec = DrafterSpec(capture_boundaries=(1, 3, 6), target_layers=8, target_model_type="deepseek_v3")
    src = build_drafter(tmp_path / "src", "vllm", spec)
    result = run_cli("--to", "sglang", "--target", write_target(tmp_path / "target", spec), "--no-record", src,
                     tmp_path / "out")
    assert result.exit_code == 1 and "[E-CAPTURE-UNEXPRESSIBLE]" in result.stderr
    assert "hint: this engine's id convention cannot express these capture layers; serve with vLLM" in result.stderr
    assert not (tmp_path / "out").exists()
