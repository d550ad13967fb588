"""Each engine's verdict on a drafter (eagle3_convert/engines/__init__.py: `serve_verdicts`, `verdict`), word for
word (issue 26, session 8: the mutants of `_verdict` and `serve_verdicts`). Each case is a builder-written drafter
(tests/builders.py), changed in one place, read as convert reads a source (`read_source`) and judged by
`serve_verdicts` as validate, convert, publish and search call it: for every runner judged, the whole verdict (its
kind, captures, why, caveats, the release judged, each release of a fleet, and the runs of releases that disagree).
The words convert and validate print of them (their "across releases" and release lines, SGLang's shield note, a
GGUF's verdicts) through the CLI in-process (conftest's run_cli). About 5 s in all, so that it can run against every
mutant of the module (tools/mutation.py MODULES)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from builders import DrafterSpec, build_drafter, write_target
from conftest import run_cli
from gguf_target import write_target_gguf
from test_drafters_2026_block import specforge_drafter

from eagle3_convert.convert import read_source
from eagle3_convert.drafter import TargetIdentity
from eagle3_convert.engines import Verdict, serve_verdicts, target_context

IDS = "eagle_aux_hidden_state_layer_ids"
EIGHT_LAYERS = TargetIdentity(model_type="llama", num_hidden_layers=8)
NEWEST = {"speculators": "0.9.0", "vllm-v1": "0.33.0", "vllm-v2": "0.33.0", "sglang": "0.5.23",
          "trtllm": "2026-sources", "llamacpp": "b11434", "mlx-vlm": "0.6.15", "lmdeploy": "0.16.0"}
FLAT_REFUSED = "the speculators library reads only speculators-format configs (speculators_model_type)"
NO_MODEL_TYPE = "TensorRT-LLM reads the config through transformers and needs a model_type (speculators configs have none)"
MIDLAYER_ONLY = ("SGLang drops layers.0.* weights (it loads midlayer.* only) (layers.0.hidden_norm.weight, "
                 "layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 more)) without a word")
TRAINED = "captures [2, 4, 5], trained maths"
SGLANG_SHIFTED = "captures layers [3, 5, 6], trained on [2, 4, 5]"  # vLLM's boundaries read as block outputs (+1)
PASS_LAYERS = "takes the capture layers at serve time: pass eagle3_layers_to_capture: [1, 3, 4]"
THEIR_DEFAULTS = "captures its default layers, the trained ones"
ONLY_ON_8 = ("captures its default layers {2, L//2, L-3}: the trained [2, 4, 5] only on an 8-layer target (pass "
             "--target to check)")
AS_IN_TRAINING = "captures its default layers {2, L//2, L-3}, as in training"
WINDOW = {"sliding_window": 64, "layer_types": ["sliding_attention"]}
WHOLE_CONTEXT = ("{} attends over the whole context where the drafter was trained with a 64-token sliding window: the "
                 "maths differ past 64 tokens")
PEAGLE_UNDECIDED = (
    "TensorRT-LLM's sources read have no P-EAGLE mode (SpeculativeDecodingMode, _torch/speculative/interface.py @ "
    "00b6d5a2; its PARD mode drafts from mask tokens without the target's hidden states): as Eagle3 it would draft "
    "autoregressively a drafter trained to draft in parallel, if its loader takes mask_hidden at all; not served as "
    "trained, whether loudly or not is not established")


def judged(tmp_path: Path, layout: str = "vllm", change: Callable[[dict], Any] | None = None,
           target: TargetIdentity | None = None, engines: tuple[str, ...] | None = None,
           releases: dict[str, list[str | None]] | None = None, **spec: Any) -> dict[str, dict[str, Any]]:
    """The verdict of each runner on the drafter `layout` writes for DrafterSpec(**spec), its config.json changed by
    `change`: all a verdict holds (to_dict, what --json shows, with the engine and the caveats)."""
    src = build_drafter(tmp_path / "src", layout, DrafterSpec(**spec))
    if change is not None:
        config = json.loads((src / "config.json").read_text())
        change(config)
        (src / "config.json").write_text(json.dumps(config))
    source = read_source(str(src))
    cfg = source.drafter.config
    found = serve_verdicts(source.stored_config, source.stored_names, cfg, target_context(cfg, target), engines,
                           releases)
    return {runner: seen(v) for runner, v in found.items()}


def seen(v: Verdict) -> dict[str, Any]:
    return {"engine": v.engine, **v.to_dict(), "caveats": list(v.caveats)}


def span(releases: str, first: str, last: str, verdict: str, why: str) -> dict[str, str]:
    return {"releases": releases, "first": first, "last": last, "verdict": verdict, "why": why}


def expect(**by_runner: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """runner (vllm_v1 for vllm-v1) -> v(...): the verdicts expected, the newest release judged unless one is named."""
    out = {}
    for key, expected in by_runner.items():
        runner = key.replace("_", "-")
        out[runner] = {"engine": runner, "release": NEWEST[runner], **expected}
    return out


def v(verdict: str, captures: list[int] | None, why: str, *caveats: str, **more: Any) -> dict[str, Any]:
    return {"verdict": verdict, "captures": captures, "why": "; ".join([why, *caveats]), "caveats": list(caveats),
            **more}


def sglang_eras(newer: dict[str, str]) -> list[dict[str, str]]:
    """SGLang's runs of releases: ≥ 0.5.12 (`newer`), and 0.5.9-0.5.11, which load midlayer.* only."""
    return [newer, span("0.5.9–0.5.11", "0.5.9", "0.5.11", "wrong", MIDLAYER_ONLY)]


def no_nested_ids(config: dict) -> None:
    """A flat file with its ids at the top level only (as vLLM reads them): SGLang, which reads the nested list,
    captures its defaults."""
    del config["eagle_config"][IDS]


def test_a_vllm_file_as_each_engine_serves_it(tmp_path: Path):
    """The speculators library refuses a flat file; vLLM and llama.cpp read its boundaries; SGLang reads them as
    block outputs (each one layer deeper), as it has since 0.5.12 (older releases also drop layer 0); TensorRT-LLM
    takes them at serve time, as block outputs. The readers judged only when named (mlx-vlm, LMDeploy) are not."""
    assert judged(tmp_path) == expect(
        speculators=v("refuses", None, FLAT_REFUSED), vllm_v1=v("as-trained", [2, 4, 5], TRAINED),
        vllm_v2=v("as-trained", [2, 4, 5], TRAINED),
        sglang=v("wrong", [3, 5, 6], SGLANG_SHIFTED,
                 releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "wrong", SGLANG_SHIFTED))),
        trtllm=v("runtime-layers", [2, 4, 5], PASS_LAYERS), llamacpp=v("as-trained", [2, 4, 5], TRAINED))


def test_defaults_that_are_the_trained_layers_only_on_some_target(tmp_path: Path):
    """SGLang reads no ids of this file: its defaults {2, L//2, L-3} are the trained [2, 4, 5] on an 8-layer target
    only, which is said while the target is unknown."""
    found = judged(tmp_path, change=no_nested_ids)
    assert found["sglang"] == expect(sglang=v(
        "default-layers", None, ONLY_ON_8,
        releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "default-layers", ONLY_ON_8))))["sglang"]
    assert [found[r]["verdict"] for r in ("vllm-v1", "vllm-v2", "trtllm", "llamacpp")] == [
        "as-trained", "as-trained", "runtime-layers", "as-trained"]


def test_defaults_that_are_the_trained_layers_on_the_target_named(tmp_path: Path):
    """The same file for an 8-layer target: SGLang's defaults and TensorRT-LLM's are the trained layers."""
    found = judged(tmp_path, change=no_nested_ids, target=EIGHT_LAYERS)
    assert {r: found[r] for r in ("sglang", "trtllm")} == expect(
        sglang=v("default-layers", [2, 4, 5], THEIR_DEFAULTS,
                 releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "default-layers", THEIR_DEFAULTS))),
        trtllm=v("default-layers", [2, 4, 5], THEIR_DEFAULTS))


def test_trained_layers_that_are_no_depths_defaults(tmp_path: Path):
    """Trained on [1, 3, 5], which are no depth's defaults: SGLang, reading no ids, never captures them; [2, 512,
    1021] are the defaults of a 1024-layer target only, beyond the depths looked at (4 to 1023)."""
    never = "captures its default layers {{2, L//2, L-3}}, never the trained {}"
    for ids, pass_ids in (((1, 3, 5), "[0, 2, 4]"), ((2, 512, 1021), "[1, 511, 1020]")):
        found = judged(tmp_path / str(ids[1]), change=no_nested_ids, capture_boundaries=ids)
        why = never.format(list(ids))
        assert found == expect(
            speculators=v("refuses", None, FLAT_REFUSED), vllm_v1=v("as-trained", list(ids), f"captures {list(ids)}, "
                                                                    "trained maths"),
            vllm_v2=v("as-trained", list(ids), f"captures {list(ids)}, trained maths"),
            sglang=v("wrong", None, why, releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "wrong", why))),
            trtllm=v("runtime-layers", list(ids), "takes the capture layers at serve time: pass "
                     f"eagle3_layers_to_capture: {pass_ids}"),
            llamacpp=v("as-trained", list(ids), f"captures {list(ids)}, trained maths")), ids


def test_a_drafter_naming_no_layers_without_the_targets_depth(tmp_path: Path):
    """No ids anywhere and no target: every engine captures its defaults, as training did; TensorRT-LLM, told the
    layers at serve time, cannot be told which."""
    both = [span("≥ 0.5.12", "0.5.12", "0.5.23", "default-layers", AS_IN_TRAINING)]
    assert judged(tmp_path, capture_boundaries=None) == expect(
        speculators=v("refuses", None, FLAT_REFUSED), vllm_v1=v("default-layers", None, AS_IN_TRAINING),
        vllm_v2=v("default-layers", None, AS_IN_TRAINING),
        sglang=v("default-layers", None, AS_IN_TRAINING, releases=sglang_eras(*both)),
        trtllm=v("runtime-layers", None, "takes the capture layers at serve time; the trained ones are unknown "
                 "without the target's depth"),
        llamacpp=v("default-layers", None, AS_IN_TRAINING))


def test_a_drafter_naming_no_layers_on_a_target_of_known_depth(tmp_path: Path):
    found = judged(tmp_path, capture_boundaries=None, target=EIGHT_LAYERS)
    assert found == expect(
        speculators=v("refuses", None, FLAT_REFUSED), vllm_v1=v("default-layers", [2, 4, 5], THEIR_DEFAULTS),
        vllm_v2=v("default-layers", [2, 4, 5], THEIR_DEFAULTS),
        sglang=v("default-layers", [2, 4, 5], THEIR_DEFAULTS,
                 releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "default-layers", THEIR_DEFAULTS))),
        trtllm=v("default-layers", [2, 4, 5], THEIR_DEFAULTS), llamacpp=v("default-layers", [2, 4, 5], THEIR_DEFAULTS))


def test_boundaries_compared_as_sets(tmp_path: Path):
    """Trained on [2, 4, 4]: the engines dedupe the ids, so vLLM's [2, 4] are the trained layers; SGLang's shifted
    ones are said once each; TensorRT-LLM is told the list as trained, not its defaults [2, 4, 5]."""
    found = judged(tmp_path, capture_boundaries=(2, 4, 4), target=EIGHT_LAYERS)
    shifted = "captures layers [3, 5], trained on [2, 4, 4]"
    assert {r: found[r] for r in ("vllm-v1", "sglang", "trtllm", "llamacpp")} == expect(
        vllm_v1=v("as-trained", [2, 4], "captures [2, 4], trained maths"),
        sglang=v("wrong", [3, 5, 5], shifted,
                 releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "wrong", shifted))),
        trtllm=v("runtime-layers", [2, 4, 4], "takes the capture layers at serve time: pass eagle3_layers_to_capture: "
                 "[1, 3, 3]"),
        llamacpp=v("as-trained", [2, 4], "captures [2, 4], trained maths"))


def test_maths_flags_an_engine_does_not_apply(tmp_path: Path):
    """Each flag an engine does not apply, in FLAGS' order, then what it drops without a word."""
    found = judged(tmp_path, norm_before_residual=True, norm_before_fc=True, fc_norm=True, norm_output=True)
    flag = "{} True in training, False in {}"
    older = [span("≥ 0.22.0", "0.22.0", "0.33.0", "as-trained", TRAINED),
             span("0.18.0–0.21.0", "0.18.0", "0.21.0", "refuses", "vLLM builds no fc_norm and fails to load fc_norm.* "
                  "(KeyError)")]
    input_norm = "SGLang drops input_norm (norm_before_fc) (input_norm.weight) without a word"
    assert found == expect(
        speculators=v("refuses", None, FLAT_REFUSED), vllm_v1=v("as-trained", [2, 4, 5], TRAINED, releases=older),
        vllm_v2=v("as-trained", [2, 4, 5], TRAINED, releases=older),
        sglang=v("wrong", [3, 5, 6], flag.format("norm_before_residual", "SGLang"), releases=[
            span("≥ 0.5.17", "0.5.17", "0.5.23", "wrong", flag.format("norm_before_residual", "SGLang")),
            span("0.5.12–0.5.16", "0.5.12", "0.5.16", "wrong", "; ".join([
                flag.format("norm_before_residual", "SGLang"), flag.format("norm_before_fc", "SGLang"), input_norm])),
            span("0.5.9–0.5.11", "0.5.9", "0.5.11", "wrong", "; ".join([
                *(flag.format(f, "SGLang") for f in ("norm_before_residual", "norm_before_fc", "fc_norm",
                                                     "norm_output")), MIDLAYER_ONLY, input_norm]))]),
        trtllm=v("wrong", None, "; ".join([flag.format("norm_before_residual", "TensorRT-LLM"),
                                           flag.format("norm_before_fc", "TensorRT-LLM"),
                                           "TensorRT-LLM drops input_norm (it reads norm_before_fc only nested) "
                                           "(input_norm.weight) without a word"])),
        llamacpp=v("refuses", None, "llama.cpp's converter cannot map its tensors (q/k norms, MLA or fc_norm): "
                   "conversion error"))


def test_a_serving_verdict_says_its_caveats_a_wrong_one_only_why(tmp_path: Path):
    """A trained sliding window neither TensorRT-LLM nor llama.cpp applies: a limit said beside each serving verdict
    (in why, and as a caveat); once llama.cpp serves the file wrong (ids listed out of order) only why it is wrong."""
    found = judged(tmp_path, extra=WINDOW)
    assert {r: found[r] for r in ("trtllm", "llamacpp")} == expect(
        trtllm=v("runtime-layers", [2, 4, 5], PASS_LAYERS, WHOLE_CONTEXT.format("TensorRT-LLM")),
        llamacpp=v("as-trained", [2, 4, 5], TRAINED, WHOLE_CONTEXT.format("llama.cpp")))
    found = judged(tmp_path / "unsorted", extra=WINDOW, change=lambda c: c.__setitem__(IDS, [5, 2, 4]))
    assert found["llamacpp"] == expect(llamacpp=v(
        "wrong", [2, 4, 5], "llama.cpp fuses the captured states in the order listed [5, 2, 4], while fc's columns "
        "follow ascending layers"))["llamacpp"]


def test_modelopts_first_layer_norm_is_approximated_by_every_engine(tmp_path: Path):
    found = judged(tmp_path, "modelopt", modelopt_hf_trained=True)
    approx = f"{TRAINED} (with ModelOpt's first-layer norm approximated, as every engine does)"
    assert {r: found[r] for r in ("vllm-v1", "vllm-v2", "sglang")} == expect(
        vllm_v1=v("wrong", [1, 3, 4], "captures layers [1, 3, 4], trained on [2, 4, 5]", releases=[
            span("≥ 0.22.0", "0.22.0", "0.33.0", "wrong", "captures layers [1, 3, 4], trained on [2, 4, 5]"),
            span("0.18.0–0.21.0", "0.18.0", "0.21.0", "default-layers", ONLY_ON_8)]),
        vllm_v2=v("default-layers", None, ONLY_ON_8),
        sglang=v("as-trained", [2, 4, 5], approx,
                 releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "as-trained", approx))))


def test_an_engine_building_another_familys_drafter_class(tmp_path: Path):
    """A Qwen3 drafter: TensorRT-LLM builds its Llama class; SGLang and llama.cpp refuse the class; vLLM serves it
    since 0.24.0."""
    found = judged(tmp_path, family="qwen3")
    older = [span("≥ 0.24.0", "0.24.0", "0.33.0", "as-trained", TRAINED),
             span("0.18.0–0.23.0", "0.18.0", "0.23.0", "refuses", "model architectures "
                  "['Eagle3Qwen3ForCausalLM'] are not supported")]
    assert found == expect(
        speculators=v("refuses", None, FLAT_REFUSED), vllm_v1=v("as-trained", [2, 4, 5], TRAINED, releases=older),
        vllm_v2=v("as-trained", [2, 4, 5], TRAINED, releases=older),
        sglang=v("refuses", None, "model architectures ['Eagle3Qwen3ForCausalLM'] are not "
                 "supported"),
        trtllm=v("wrong", None, "builds its llama drafter class for a qwen3 drafter"),
        llamacpp=v("refuses", None, "llama.cpp's converter has no EAGLE-3 model for architectures "
                   "['Eagle3Qwen3ForCausalLM']"))


def test_an_engine_building_another_kind_of_drafter(tmp_path: Path):
    """A speculators P-EAGLE drafter named with the EAGLE-3 class: llama.cpp builds its EAGLE-3 drafter, reading the
    layers it captures."""
    found = judged(tmp_path, "speculators", peagle_mask_token_id=7,
                   change=lambda c: c.__setitem__("architectures", ["Eagle3Speculator"]))
    assert found == expect(
        speculators=v("as-trained", [2, 4, 5], TRAINED), vllm_v1=v("as-trained", [2, 4, 5], TRAINED),
        vllm_v2=v("as-trained", [2, 4, 5], TRAINED),
        sglang=v("refuses", None, "model architectures ['Eagle3Speculator'] are not supported"),
        trtllm=v("refuses", None, NO_MODEL_TYPE),
        llamacpp=v("wrong", [2, 4, 5], "builds its eagle3 drafter for a peagle drafter"))


def test_a_kind_whose_serving_the_sources_do_not_decide(tmp_path: Path):
    """A flat P-EAGLE drafter: TensorRT-LLM's sources read do not say how it serves one (unknown), though it reads
    the file."""
    found = judged(tmp_path, peagle_mask_token_id=7, engines=("trtllm", "vllm-v1"))
    assert found == expect(trtllm=v("unknown", None, PEAGLE_UNDECIDED), vllm_v1=v("as-trained", [2, 4, 5], TRAINED))


def test_each_release_of_a_fleet(tmp_path: Path):
    """Releases named twice (or the newest, named and as None) are judged once; the worst verdict leads, each
    release's own is kept; a release this tool does not model is judged by the nearest known one's rules (issue 34),
    which its own verdict names (`judged_by`), never the fleet's."""
    found = judged(tmp_path, releases={"vllm": ["0.25.0", "9.9.9", "0.25.0"], "sglang": ["0.5.10", None, "0.5.23"]})
    fleet = v("as-trained", [2, 4, 5], f"0.25.0: as-trained ({TRAINED}); 9.9.9: as-trained ({TRAINED})",
              release="0.25.0, 9.9.9",
              judged=[{"verdict": "as-trained", "captures": [2, 4, 5], "why": TRAINED, "release": "0.25.0"},
                      {"verdict": "as-trained", "captures": [2, 4, 5], "why": TRAINED, "release": "9.9.9",
                       "judged_by": "0.33.0"}])
    assert found == expect(
        speculators=v("refuses", None, FLAT_REFUSED), vllm_v1=fleet, vllm_v2=fleet,
        sglang=v("wrong", [3, 5, 6], f"0.5.10: wrong ({MIDLAYER_ONLY}); 0.5.23: wrong ({SGLANG_SHIFTED})",
                 release="0.5.10, 0.5.23",
                 judged=[{"verdict": "wrong", "captures": [3, 5, 6], "why": MIDLAYER_ONLY, "release": "0.5.10"},
                         {"verdict": "wrong", "captures": [3, 5, 6], "why": SGLANG_SHIFTED, "release": "0.5.23"}],
                 releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "wrong", SGLANG_SHIFTED))),
        trtllm=v("runtime-layers", [2, 4, 5], PASS_LAYERS), llamacpp=v("as-trained", [2, 4, 5], TRAINED))


@pytest.mark.parametrize("named, release", [("0.5.15", "0.5.15"), ("v0.5.15", "0.5.15"), ("0.5.12", "0.5.12")])
def test_a_release_is_judged_as_its_era_reads_the_file(tmp_path: Path, named: str, release: str):
    """Any release of 0.5.12-0.5.16 (spelled with a v or not) reads the file as 0.5.12 does, and is named as it is."""
    unapplied = "norm_before_fc True in training, False in SGLang"
    input_norm = "SGLang drops input_norm (norm_before_fc) (input_norm.weight) without a word"
    why = f"{unapplied}; {input_norm}"
    found = judged(tmp_path, engines=("sglang",), releases={"sglang": [named]}, norm_before_fc=True)
    assert found == expect(sglang=v("wrong", [3, 5, 6], why, release=release, releases=[
        span("≥ 0.5.17", "0.5.17", "0.5.23", "wrong", SGLANG_SHIFTED),
        span("0.5.12–0.5.16", "0.5.12", "0.5.16", "wrong", why),
        span("0.5.9–0.5.11", "0.5.9", "0.5.11", "wrong", f"{unapplied}; {MIDLAYER_ONLY}; {input_norm}")]))


@pytest.mark.parametrize("ids, why", [
    ((2, 2, 1), "captures its default layers {2, L//2, L-3}: the trained [2, 2, 1] only on a 4-layer target (pass "
                "--target to check)"),
    ((0, 1, 2), "captures its default layers {2, L//2, L-3}, never the trained [0, 1, 2]")])
def test_the_depths_whose_defaults_are_looked_at(tmp_path: Path, ids: tuple[int, ...], why: str):
    """Depths from 4 up: [2, 2, 1] are a 4-layer target's defaults {2, 4//2, 4-3}; [0, 1, 2] would be a 3-layer
    one's, which is too shallow to be looked at."""
    found = judged(tmp_path, change=no_nested_ids, engines=("sglang",), capture_boundaries=ids)
    verdict = "wrong" if "never" in why else "default-layers"
    assert found == expect(sglang=v(verdict, None, why,
                                    releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", verdict, why))))


def test_defaults_that_are_not_the_trained_layers_on_the_target_named(tmp_path: Path):
    """Trained on [1, 3, 5], for an 8-layer target: SGLang, reading no ids, captures its defaults [2, 4, 5]."""
    found = judged(tmp_path, change=no_nested_ids, target=EIGHT_LAYERS, engines=("sglang",), capture_boundaries=(1, 3, 5))
    why = "captures its default layers [2, 4, 5], trained on [1, 3, 5]"
    assert found == expect(sglang=v("wrong", [2, 4, 5], why,
                                    releases=sglang_eras(span("≥ 0.5.12", "0.5.12", "0.5.23", "wrong", why))))


LMDEPLOY_TARGETS = ("LMDeploy sets the capture layers only for LlamaForCausalLM targets (configurations/llama.py: "
                    "aux_hidden_state_layers = (2, L//2, L-3))")


def test_the_readers_judged_only_when_named(tmp_path: Path):
    """mlx-vlm and LMDeploy are judged when a release of theirs is named (None: the newest), beside every runner:
    an original EAGLE-3 file named LlamaForCausalLM, as LMDeploy's docs serve it, with its caveat."""
    found = judged(tmp_path, "eagle", change=lambda c: c.__setitem__("architectures", ["LlamaForCausalLM"]),
                   target=EIGHT_LAYERS, embed_tokens=True, capture_boundaries=None,
                   releases={"lmdeploy": [None], "mlx-vlm": ["0.6.15"]})
    assert list(found) == ["speculators", "vllm-v1", "vllm-v2", "sglang", "trtllm", "llamacpp", "mlx-vlm", "lmdeploy"]
    assert {r: found[r] for r in ("mlx-vlm", "lmdeploy")} == expect(
        mlx_vlm=v("refuses", None, "mlx-vlm builds its EAGLE-3 drafter only for model_type / speculators_model_type "
                  "'eagle3' (get_model_and_args); 'llama' loads another model or none, and its strict load_weights "
                  "fails on the drafter's tensors"),
        lmdeploy=v("default-layers", [2, 4, 5], THEIR_DEFAULTS, LMDEPLOY_TARGETS))


def test_a_gguf_is_loaded_by_llama_cpp_only_as_planned_and_as_read_from_disk(tmp_path: Path):
    """--to gguf: judged on the plan (its keys under "gguf", our record beside them), then on the file written, read
    back (its keys at the top): llama.cpp serves both alike, the trained window its record carries said; every
    other engine refuses the format by name."""
    spec = DrafterSpec(extra=WINDOW)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    target = write_target_gguf(tmp_path / "target.gguf", layers=spec.target_layers, hidden=spec.ht,
                               vocab=spec.vocab_size)
    done = run_cli("--no-record", "--to", "gguf", "--target-gguf", target, src, tmp_path / "out", "--json")
    assert done.exit_code == 0, done.stderr
    gguf = v("refuses", None, "a GGUF is llama.cpp's format, not one this engine loads")
    llamacpp = v("as-trained", [2, 4, 5], TRAINED, WHOLE_CONTEXT.format("llama.cpp"))
    expected = expect(speculators=gguf, vllm_v1=gguf, vllm_v2=gguf, sglang=gguf, trtllm=gguf, llamacpp=llamacpp)
    planned = json.loads(done.stdout)["serves"]
    assert planned == {r: {k: x for k, x in e.items() if k not in ("engine", "caveats")} for r, e in expected.items()}
    source = read_source(str(tmp_path / "out"))
    assert "_gguf" in source.stored_config and "gguf" not in source.stored_config, list(source.stored_config)
    cfg = source.drafter.config
    found = serve_verdicts(source.stored_config, source.stored_names, cfg, target_context(cfg))
    assert {r: seen(x) for r, x in found.items()} == expected


def test_the_target_a_drafter_records_decides_its_defaults(tmp_path: Path):
    """A drafter converted with --target records it (eagle3-convert.json): its verdicts, judged with no target
    named, are on that target's depth (8 layers: the defaults [2, 4, 5] are the layers it was trained on)."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(capture_boundaries=None))
    done = run_cli("--no-record", "--to", "vllm", "--target", write_target(tmp_path / "target", DrafterSpec()), src,
                   tmp_path / "out")
    assert done.exit_code == 0, done.stderr
    source = read_source(str(tmp_path / "out"))
    cfg = source.drafter.config
    assert cfg.target is not None and cfg.target.num_hidden_layers == 8, cfg.target
    found = serve_verdicts(source.stored_config, source.stored_names, cfg, target_context(cfg))
    assert seen(found["trtllm"]) == expect(trtllm=v("default-layers", [2, 4, 5], THEIR_DEFAULTS))["trtllm"]


def test_convert_says_where_the_releases_disagree(tmp_path: Path):
    """convert's serve lines: one line per runner whose known releases read the file differently, each run of them
    (a serving run without its why, another with it)."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(fc_norm=True))
    done = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert done.exit_code == 0, done.stderr
    assert [line.strip() for line in done.stdout.splitlines() if "across releases" in line] == [
        "across releases: served as trained on ≥ 0.22.0; refused loudly on 0.18.0–0.21.0 (vLLM builds no fc_norm and "
        "fails to load fc_norm.* (KeyError))"] * 2 + [
        "across releases: served as trained on ≥ 0.5.12; served WRONG on 0.5.9–0.5.11 (fc_norm True in training, False "
        f"in SGLang; {MIDLAYER_ONLY})"], done.stdout


def test_validate_names_the_releases_it_judged(tmp_path: Path):
    """--engine sglang==0.5.10 --engine sglang (its newest) --engine vllm-v1==0.25.0, one named twice: each release
    once, the newest by its number, a runner's release under its engine."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec())
    done = run_cli("validate", "--json", "--engine", "sglang==0.5.10", "--engine", "sglang", "--engine",
                   "vllm-v1==0.25.0", "--engine", "sglang==0.5.10", "--engine", "llamacpp==b99999", src)
    report = json.loads(done.stdout)
    assert report["releases"] == ["SGLang 0.5.10, 0.5.23", "vLLM 0.25.0", "llama.cpp b99999"], report["releases"]


def test_sglang_is_made_to_refuse_a_flat_file_it_would_serve_wrong(tmp_path: Path):
    """--to vllm of a drafter trained with norm_before_residual, which SGLang does not apply: the file names its
    class as only vLLM spells it, so that SGLang refuses it."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(norm_before_residual=True))
    done = run_cli("--no-record", "--to", "vllm", "--json", src, tmp_path / "out")
    assert done.exit_code == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["notes"] == [
        "architectures set to ['Eagle3LlamaForCausalLM'], a name vLLM resolves and SGLang refuses: SGLang would load "
        "this file and serve it wrong (norm_before_residual True in training, False in SGLang)"], said["notes"]
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == ["Eagle3LlamaForCausalLM"]
    assert said["serves"]["sglang"]["verdict"] == "refuses", said["serves"]["sglang"]


def test_an_mla_drafter_without_a_target_is_judged_on_deepseeks_rules(tmp_path: Path):
    """No target named: an MLA drafter serves a DeepSeek/Kimi target, on which SGLang (since 0.5.13) reads a nested
    list that does not start at 1 as boundaries as written."""
    found = judged(tmp_path, family="deepseek_mla", engines=("sglang",))
    assert found == expect(sglang=v("as-trained", [2, 4, 5], TRAINED, releases=[
        span("≥ 0.5.13", "0.5.13", "0.5.23", "as-trained", TRAINED),
        span("0.5.12–0.5.12.post1", "0.5.12", "0.5.12.post1", "wrong", SGLANG_SHIFTED),
        span("0.5.9–0.5.11", "0.5.9", "0.5.11", "refuses", "model architectures "
             "['Eagle3DeepseekV2ForCausalLM'] are not supported")]))


def test_sglangs_shield_is_judged_on_the_target_named(tmp_path: Path):
    """ModelOpt ids [0, 2, 4] (boundaries 1, 3, 5): SGLang on a DeepSeek target reads a list not starting at 1 as
    boundaries as written; only --target says the target is DeepSeek's, and the shield is judged on it."""
    spec = DrafterSpec(capture_boundaries=(1, 3, 5), target_model_type="deepseek_v3")
    src = build_drafter(tmp_path / "src", "vllm", spec)
    done = run_cli("--no-record", "--to", "modelopt", "--json", "--target", write_target(tmp_path / "target", spec),
                   src, tmp_path / "out")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["notes"][-1] == (
        "architectures set to ['Eagle3LlamaForCausalLM'], a name vLLM resolves and SGLang refuses: SGLang would load "
        "this file and serve it wrong (captures layers [0, 2, 4], trained on [1, 3, 5])")


def test_validate_says_where_the_releases_disagree_and_only_there(tmp_path: Path):
    """SGLang's releases read a vLLM file in two ways (one line, I-ENGINE-RELEASES); vLLM's all read it alike
    (nothing said)."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec())
    report = json.loads(run_cli("validate", "--json", "--engine", "vllm", "--engine", "sglang", src).stdout)
    assert [(f["engine"], f["message"]) for f in report["findings"] if f["code"] == "I-ENGINE-RELEASES"] == [
        ("sglang", f"SGLang releases disagree on this file: served WRONG on ≥ 0.5.12 ({SGLANG_SHIFTED}); served WRONG "
                   f"on 0.5.9–0.5.11 ({MIDLAYER_ONLY})")], report["findings"]


def test_a_block_diffusion_verdict_for_a_release_whose_reading_is_unknown(tmp_path: Path):
    """A DFlash drafter (SpecForge's config): SGLang 0.5.22 named, whose DFlash reader was not read: unknown, that
    release named; the others judged for their newest release."""
    src = specforge_drafter(tmp_path / "src", "dflash")
    source = read_source(str(src))
    cfg = source.drafter.config
    found = serve_verdicts(source.stored_config, source.stored_names, cfg, target_context(cfg), None,
                           {"sglang": ["0.5.22"], "vllm": [None]})
    served = v("as-trained", [2, 10, 18, 26, 34], "builds DFlashQwen3ForCausalLM, capturing boundaries [2, 10, 18, 26, "
               "34]")
    trtllm = v("unknown", None, "TensorRT-LLM's DFlashForCausalLM (modeling_dflash.py @ 7c7504c0) reads "
               "dflash_config's mask_token_id, target_layer_ids and block_size, but how it turns target_layer_ids "
               "into captured layers was not read")
    llamacpp = v("unknown", None, "llama.cpp serves DFlash from a GGUF of architecture `dflash` (`--spec-type "
                 "draft-dflash`, PR 22105), not from this file: its converter (conversion/qwen.py DFlashModel) was "
                 "not read at a citable commit; `--to gguf --target-gguf TARGET.gguf` writes that GGUF, judged by llama.cpp's reading as it is written")
    assert {r: seen(x) for r, x in found.items()} == expect(
        speculators=v("refuses", None, "from_pretrained reads only a speculators config (speculators_model_type); "
                      "`speculators convert` writes one from this DFlash file"),
        vllm_v1=served, vllm_v2=served,
        sglang=v("unknown", None, "DFlash drafters were read in SGLang 0.5.23 only, not 0.5.22", release="0.5.22"),
        trtllm=trtllm, llamacpp=llamacpp)
