"""No file we write is a trap: for every layout x drafter family x (non-default) capture layers, each
engine that opens our output either captures the trained layers or refuses the file loudly.

Two readings are checked here, on CPU and without the engines installed: our own engine modules
(`eagle3_convert.engines`, whose verdict convert prints) and, independently, the capture rules as the
engines' source states them (docs/formats.md §6), replayed in a few lines below. The real SGLang and vLLM
loaders check the same files in tests/test_engines.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter, capture_refusal, expected_refusal, write_target
from conftest import DATA, run_cli

from eagle3_convert.provenance import Known
from eagle3_convert.safetensors_io import read_tensor_table

LAYOUTS = ("speculators", "sglang", "vllm", "eagle", "modelopt")
FAMILIES = {
    "llama": DrafterSpec(target_layers=8),
    "llama 2 layers": DrafterSpec(target_layers=8, num_layers=2),
    "llama norm_before_residual": DrafterSpec(target_layers=8, norm_before_residual=True),
    "qwen3": DrafterSpec(target_layers=8, family="qwen3"),
    "mla (Kimi/DeepSeek)": DrafterSpec(target_layers=8, family="deepseek_mla", target_model_type="deepseek_v3"),
}
BOUNDARIES = [(1, 3, 6), (2, 4, 8)]  # non-default: defaults would hide a lost list; 8 = last block's output
SGLANG_CLASSES = {"LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM"}
VLLM_CLASSES = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Qwen3ForCausalLM",
                "Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"}
IDS = "eagle_aux_hidden_state_layer_ids"


def sglang_boundaries(ids: list[int], deepseek: bool) -> list[int]:
    """SGLang's reading of nested ids (docs/formats.md §4): block outputs, with the DeepSeek/Kimi quirk."""
    if deepseek:
        return [x + 1 for x in ids] if ids[0] == 1 else list(ids)
    return [x + 1 for x in ids]


def independent_reading(config: dict, engine: str, deepseek: bool, depth: int) -> list[int] | str:
    """The layers an engine captures from this config, replayed from the facts; 'refuses' when it does."""
    default = [2, depth // 2, depth - 3]
    top, nested = config.get(IDS), (config.get("eagle_config") or {}).get(IDS)
    archs = config.get("architectures") or []
    if engine == "sglang":
        if "speculators_model_type" in config or not SGLANG_CLASSES & set(archs):
            return "refuses"
        return sglang_boundaries(nested, deepseek) if nested else default
    if "speculators_model_type" not in config and not VLLM_CLASSES & set(archs):
        return "refuses"
    if engine == "vllm-v1":
        return top or nested or default
    return top or default  # vllm-v2


def convert(src: Path, layout: str, target: Path, out: Path):
    result = run_cli("--to", layout, "--target", target, "--verifier", "org/target-model", "--json", "--no-record",
                     src, out)
    return result, json.loads(result.stdout)


CELLS = [(layout, family, b) for layout in LAYOUTS for family in FAMILIES for b in BOUNDARIES]


@pytest.mark.parametrize("layout,family,boundaries", CELLS, ids=[f"{f} {list(b)} -> {lay}" for lay, f, b in CELLS])
def test_every_engine_reads_our_output_right_or_refuses_it(layout: str, family: str, boundaries: tuple[int, ...],
                                                           tmp_path: Path):
    spec = FAMILIES[family].with_(capture_boundaries=boundaries)
    src = build_drafter(tmp_path / "src", "vllm" if spec.family == "deepseek_mla" else "speculators", spec)
    target = write_target(tmp_path / "target", spec)
    result, doc = convert(src, layout, target, tmp_path / "out")
    refusal = expected_refusal(layout, spec) or capture_refusal(layout, spec)  # the builder's independent rules
    if refusal is not None:
        assert result.exit_code == 1 and doc["ok"] is False and doc["error"]["code"] == refusal[0], (refusal, doc)
        assert not (tmp_path / "out").exists()
        return
    assert result.exit_code == 0, doc
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    deepseek = spec.target_model_type.startswith("deepseek")
    for engine in ("sglang", "vllm-v1", "vllm-v2"):
        ours = doc["serves"][engine]
        replayed = independent_reading(config, engine, deepseek, spec.target_layers)
        assert ours["verdict"] != "wrong", (engine, ours)
        if replayed == "refuses":
            assert ours["verdict"] == "refuses", (engine, ours)
        else:
            assert sorted(replayed) == list(boundaries), f"{engine} would capture {replayed}: a trap"
            assert ours["verdict"] == "as-trained" and ours["captures"] == list(boundaries), (engine, ours)


def test_vllm_output_is_read_right_by_sglang(tmp_path: Path):
    """Issue 11: `--to vllm` output served by SGLang captured [2,4,7] for boundaries [1,3,6]."""
    spec = DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6))
    src, target = build_drafter(tmp_path / "s", "speculators", spec), write_target(tmp_path / "t", spec)
    result, doc = convert(src, "vllm", target, tmp_path / "v")
    config = json.loads((tmp_path / "v" / "config.json").read_text())
    assert config[IDS] == [1, 3, 6] and config["eagle_config"][IDS] == [0, 2, 5]
    assert sglang_boundaries(config["eagle_config"][IDS], False) == [1, 3, 6]
    sglang = doc["serves"]["sglang"]  # judged for the newest release; `releases` says where older ones differ
    assert {k: sglang[k] for k in ("verdict", "captures", "why", "release")} == {
        "verdict": "as-trained", "captures": [1, 3, 6], "why": "captures [1, 3, 6], trained maths", "release": "0.5.23"}


def test_vllm_output_sglang_cannot_capture_is_refused_by_sglang(tmp_path: Path):
    """Boundary 8 of an 8-layer target is the last block's output: SGLang never captures it."""
    spec = DrafterSpec(target_layers=8, capture_boundaries=(2, 4, 8))
    src, target = build_drafter(tmp_path / "s", "speculators", spec), write_target(tmp_path / "t", spec)
    result, doc = convert(src, "vllm", target, tmp_path / "v")
    config = json.loads((tmp_path / "v" / "config.json").read_text())
    assert config["architectures"] == ["Eagle3LlamaForCausalLM"]  # vLLM resolves it, SGLang refuses it
    assert doc["serves"]["sglang"]["verdict"] == "refuses"
    assert doc["serves"]["vllm-v2"]["captures"] == [2, 4, 8]


@pytest.mark.parametrize("layout", ["sglang", "modelopt"])
def test_nested_id_layouts_carry_boundaries_for_vllm(layout: str, tmp_path: Path):
    """Issue 11: vLLM V2 ignored the nested ids (defaults [2,4,5]); V1 read them as boundaries ([0,2,5])."""
    spec = DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6))
    src, target = build_drafter(tmp_path / "s", "speculators", spec), write_target(tmp_path / "t", spec)
    result, doc = convert(src, layout, target, tmp_path / "o")
    assert result.exit_code == 0, result.stderr
    config = json.loads((tmp_path / "o" / "config.json").read_text())
    assert config[IDS] == [1, 3, 6] and config["eagle_config"][IDS] == [0, 2, 5]
    for engine in ("vllm-v1", "vllm-v2", "sglang"):
        assert doc["serves"][engine]["captures"] == [1, 3, 6], engine


def test_norm_before_residual_drafter_written_for_vllm_is_refused_by_sglang(tmp_path: Path):
    """Issue 11: the speculators-trained drafter's --to vllm output loaded in SGLang with other maths."""
    src = tmp_path / "trained"
    shutil.copytree(DATA / "speculators-trained" / "checkpoint", src)
    result = run_cli("--to", "vllm", "--json", "--no-record", src, tmp_path / "v")
    doc = json.loads(result.stdout)
    assert result.exit_code == 0, result.stderr
    config = json.loads((tmp_path / "v" / "config.json").read_text())
    assert config["norm_before_residual"] is True and config["architectures"] == ["Eagle3LlamaForCausalLM"]
    assert doc["serves"]["sglang"]["verdict"] == "refuses"
    assert {doc["serves"][e]["verdict"] for e in ("vllm-v1", "vllm-v2")} == {"as-trained"}
    assert any("SGLang would load this file and serve it wrong" in n for n in doc["notes"])


def test_speculators_verifier_is_a_repo_id_where_the_target_names_one(tmp_path: Path):
    """Issue 11: `--verifier ./local-dir` wrote a name the `vllm serve DRAFTER` shortcut refuses. The repo id the
    target's config names is written; a target that names none is written by its resolved path, which vLLM serves
    through --speculative-config, and convert says so (issue 34: a file some way serves is no error)."""
    spec = DrafterSpec(verifier="meta-llama/Llama-3.1-8B-Instruct")
    src = build_drafter(tmp_path / "s", "sglang", spec)
    named = write_target(tmp_path / "named", spec)  # its config.json says _name_or_path, as transformers saves
    result = run_cli("--to", "speculators", "--verifier", named, "--no-record", src, tmp_path / "a")
    assert result.exit_code == 0, result.stderr
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["speculators_config"]["verifier"]["name_or_path"] == "meta-llama/Llama-3.1-8B-Instruct"

    anonymous = write_target(tmp_path / "anon", spec)
    cfg = json.loads((anonymous / "config.json").read_text())
    del cfg["_name_or_path"]
    (anonymous / "config.json").write_text(json.dumps(cfg))
    result = run_cli("--to", "speculators", "--verifier", anonymous, "--no-record", "--json", src, tmp_path / "b")
    assert result.exit_code == 0, result.stderr
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    assert config["speculators_config"]["verifier"]["name_or_path"] == str(anonymous.resolve())
    serves = json.loads(result.stdout)["serves"]
    for runner in ("vllm-v1", "vllm-v2"):
        assert serves[runner]["verdict"] == "as-trained" and "vllm serve TARGET --speculative-config" in serves[
            runner]["why"] and "the `vllm serve DRAFTER` shortcut" in serves[runner]["why"], serves[runner]


def test_convert_prints_one_serve_line_per_engine(tmp_path: Path):
    spec = DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6))
    src, target = build_drafter(tmp_path / "s", "speculators", spec), write_target(tmp_path / "t", spec)
    result = run_cli("--to", "sglang", "--target", target, "--no-record", src, tmp_path / "o")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert [line.split()[0] for line in lines] == ["speculators", "vLLM", "vLLM", "SGLang", "TensorRT-LLM", "llama.cpp"]
    assert "SGLang" in lines[3] and "serves as trained" in lines[3]
    assert "eagle3_layers_to_capture: [0, 2, 5]" in lines[4]  # TensorRT-LLM takes them at serve time


def test_target_dependent_sglang_ids_follow_what_the_config_betrays(tmp_path: Path):
    """Issue 12: SpecForge's Kimi-K2.5 export (a Llama-style drafter, model_type kimi_k2) with ids [2,30,58]
    and no --target was written as [3,31,59]: SGLang reads those ids raw on DeepSeek/Kimi targets."""
    spec = DrafterSpec(target_layers=61, capture_boundaries=(3, 31, 59))
    src = build_drafter(tmp_path / "kimi", "sglang", spec)
    config = json.loads((src / "config.json").read_text())
    config["model_type"] = "kimi_k2"
    config["eagle_config"][IDS] = [2, 30, 58]
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--to", "speculators", "--verifier", "moonshotai/Kimi-K2.5", "--no-record", src, tmp_path / "s")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "s" / "config.json").read_text())[IDS] == [2, 30, 58]
    assert "inferred from the drafter config's model_type 'kimi_k2'" in result.stdout
    side = json.loads((tmp_path / "s" / "eagle3-convert.json").read_text())
    assert side["target"]["model_type"] == "kimi_k2" and side["target"]["name_or_path"] == "moonshotai/Kimi-K2.5"
    # and back: [1, 29, 57] is what SGLang reads as [2, 30, 58] on a Kimi target (ids[0] == 1: +1), and on any other
    assert run_cli("--to", "sglang", "--no-record", tmp_path / "s", tmp_path / "back").exit_code == 0
    assert json.loads((tmp_path / "back" / "config.json").read_text())["eagle_config"][IDS] == [1, 29, 57]


def test_validate_reads_target_dependent_ids_as_convert_does(tmp_path: Path):
    spec = DrafterSpec(target_layers=61, capture_boundaries=(3, 31, 59))
    src = build_drafter(tmp_path / "kimi", "sglang", spec)
    config = json.loads((src / "config.json").read_text())
    config.update(model_type="kimi_k2")
    config["eagle_config"][IDS] = [2, 30, 58]
    (src / "config.json").write_text(json.dumps(config))
    # recorded as trained on [2, 30, 58]: a reading one layer off would be E-CAPTURE-RECORD
    from eagle3_convert.validate import validate_checkpoint
    report = validate_checkpoint(src, known=[Known("the training record", [2, 30, 58])])
    assert not report.codes("error"), [f.message for f in report.findings]
    assert validate_checkpoint(src, known=[Known("the training record", [3, 31, 59])]).codes("error")


def _modelopt_file(tmp_path: Path, spec: DrafterSpec, edit) -> tuple[Path, dict, list[str]]:
    src = build_drafter(tmp_path / "src", "modelopt", spec)
    config = json.loads((src / "config.json").read_text())
    edit(config)
    (src / "config.json").write_text(json.dumps(config))
    return src, config, list(read_tensor_table(src)[0])


@pytest.mark.parametrize("architectures", [["LlamaForCausalLMEagle3"], ["Eagle3DeepseekV3ForCausalLM"],
                                           ["Eagle3DeepseekV2ForCausalLM"], ["SomeFutureEagle3Name"]])
@pytest.mark.parametrize("family", ["llama", "deepseek_mla"])
def test_tensorrt_llm_builds_its_one_model_drafter_whatever_the_architecture(tmp_path: Path, architectures, family):
    """TensorRT-LLM's default path (eagle3_one_model: true) builds Eagle3ForCausalLM from the config alone
    (modeling_speculative._build_eagle3_one_model_draft), MLA iff kv_lora_rank: the architecture name decides
    nothing, so no name is refused and none picks the class. validate --engine trtllm agrees."""
    from eagle3_convert.engines import TargetContext, read_all

    spec = DrafterSpec(target_layers=8, family=family,
                       target_model_type="deepseek_v3" if family == "deepseek_mla" else "llama")
    src, config, names = _modelopt_file(tmp_path, spec, lambda c: c.update(architectures=architectures))
    reading = read_all(config, names, TargetContext(), engines=("trtllm",))["trtllm"]
    assert reading.refusal is None and reading.family == family and reading.runtime
    report = run_cli("validate", src, "--engine", "trtllm", "--json")
    codes = {f["code"] for f in json.loads(report.stdout)["findings"]}
    assert "E-CONFIG-ARCH" not in codes, report.stdout


def test_tensorrt_llm_without_draft_vocab_size_takes_the_target_vocab(tmp_path: Path):
    """A missing draft_vocab_size becomes vocab_size (_ensure_draft_vocab_size): loud for a Vd < V drafter (its
    d2t and lm_head do not fit), served for a full-vocabulary one."""
    from eagle3_convert.engines import TargetContext, read_all

    drop = lambda c: c.pop("draft_vocab_size", None)  # noqa: E731
    _, config, names = _modelopt_file(tmp_path / "small", DrafterSpec(target_layers=8), drop)
    small = read_all(config, names, TargetContext(), engines=("trtllm",))["trtllm"]
    assert small.refusal and "draft_vocab_size" in small.refusal
    _, config, names = _modelopt_file(tmp_path / "full", DrafterSpec(target_layers=8, draft_vocab_size=None), drop)
    assert "d2t" not in names
    full = read_all(config, names, TargetContext(), engines=("trtllm",))["trtllm"]
    assert full.refusal is None and full.family == "llama"
