"""DFlash and DSpark in their two layouts, word for word (issue 26, session 8: the mutation survivors of
eagle3_convert/converters/dflash.py).

The files are tests/test_drafters_2026_block.py's independent builders: SpecForge's published
configs/qwen3-8b-{dflash,dspark}.json shrunk (the flat `dflash` layout) and speculators' DFlash/DSpark configs as its
config classes save them. One change each, through the real CLI: the drafter `inspect` reads, the config and tensors
`convert` writes for each layout that holds a block-diffusion drafter (dflash, speculators), its notes, its one-line
refusals word for word, and which layout detection names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from builders import RawTensor, write_safetensors
from conftest import run_cli, tensor_hashes
from test_drafters_2026_block import (HEADS, LAYERS, RANK, VOCAB, H, _tensor, body_tensors, specforge_drafter,
                                      speculators_drafter)

Edit = Callable[[dict[str, Any]], Any]
VERIFIER = "Qwen/Qwen3-8B"
MASK = VOCAB - 3  # the builders' mask token
FLAT_CLASS = {"dflash": "DFlashDraftModel", "dspark": "DSparkDraftModel"}
SPECULATORS_CLASS = {"dflash": "DFlashSpeculator", "dspark": "DSparkSpeculator"}
LABEL = {"dflash": "DFlash", "dspark": "DSpark"}
SAMPLE_NOTE = "sample_from_anchor absent: read as true, as vLLM and SGLang read a flat DSpark config"
BOTH_PLACES_NOTE = ("the DSpark fields are written in dflash_config (SpecForge reads them there) and at the top level "
                    "(vLLM, SGLang and speculators' converter read them there)")
# What the shrunk SpecForge configs hold besides the decoder
SPECFORGE_OWN = ("architectures", "auto_map", "block_size", "dflash_config", "num_target_layers", "dtype")
SPECFORGE_DSPARK_NESTED = {"attention_mode": "gqa", "confidence_head_alpha": 1.0, "confidence_head_with_markov": True,
                           "enable_confidence_head": True, "markov_head_type": "vanilla", "markov_rank": RANK,
                           "projector_type": "dspark"}
DSPARK_HEADS = {"markov_rank": RANK, "markov_head_type": "vanilla", "enable_confidence_head": True,
                "confidence_head_with_markov": True}


# ------------------------------------------------------------------ the files, one change each

def flat(tmp_path: Path, kind: str, *edits: Edit, name: str = "src",
         tensors: Callable[[dict[str, RawTensor]], dict[str, RawTensor]] | None = None) -> Path:
    """SpecForge's published config of `kind`, shrunk, as its trainer saves the drafter; then `edits` (and `tensors`:
    the tensors it saves instead, from those it saves)."""
    src = specforge_drafter(tmp_path / name, kind)
    if tensors is not None:
        write_safetensors(src / "model.safetensors", tensors(body_tensors(written(src), kind)))
    return edited(src, *edits)


def spec(tmp_path: Path, kind: str, *edits: Edit, ids: list[int] | None = None, name: str = "src",
         **builder: Any) -> Path:
    """speculators' DFlash/DSpark as its config class saves it (boundaries [2, 18, 34]); then `edits`."""
    return edited(speculators_drafter(tmp_path / name, kind, ids or [2, 18, 34], **builder), *edits)


def edited(src: Path, *edits: Edit) -> Path:
    config = json.loads((src / "config.json").read_text())
    for edit in edits:
        edit(config)
    (src / "config.json").write_text(json.dumps(config, indent=2))
    return src


def top(**keys: Any) -> Edit:
    return lambda c: c.update(keys)


def nested(**keys: Any) -> Edit:
    return lambda c: c["dflash_config"].update(keys)


def drop(*keys: str) -> Edit:
    return lambda c: [c.pop(k) for k in keys]


def drop_nested(*keys: str) -> Edit:
    return lambda c: [c["dflash_config"].pop(k) for k in keys]


def lift(key: str) -> Edit:
    """`key` moved from dflash_config to the top level (deepseek-ai's dense DSpark spelling)."""
    return lambda c: c.update({key: c["dflash_config"].pop(key)})


def convert(src: Path, dest: Path, *args: str) -> Any:
    return run_cli("--no-record", *args, src, dest)


def written(dest: Path) -> dict[str, Any]:
    return json.loads((dest / "config.json").read_text())


def notes(stdout: str) -> list[str]:
    return [line.removeprefix("note: ") for line in stdout.splitlines() if line.startswith("note: ")]


def refused(result: Any) -> str:
    """The one line of a refusal (after the line saying which layout was detected), with no traceback."""
    assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("detected ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def reading(src: Path) -> dict[str, Any]:
    """The drafter `inspect --json` reads (the canonical config, the target, the reader's notes)."""
    view = json.loads(run_cli("inspect", "--json", src).stdout)["drafter"]
    return {k: view[k] for k in ("layout", "config", "target", "notes")}


# ------------------------------------------------------------------ what each reader reads

COMMON = {"family": "qwen3", "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "num_layers": 2, "rms_norm_eps": 1e-06, "hidden_act": "silu",
          "max_position_embeddings": 40960, "mla": None, "vocab_size": VOCAB, "draft_vocab_size": VOCAB,
          "target_hidden_size": 64, "norm_before_residual": False, "norm_before_fc": False, "fc_norm": False,
          "norm_output": False, "input_layernorm_on_hidden": False, "attention_bias": False, "mlp_bias": False,
          "tie_word_embeddings": False, "mask_token_id": MASK, "rope": {"rope_theta": 1000000, "rope_type": "default"}}
NO_TARGET = {"name_or_path": None, "architectures": [], "revision": None, "model_type": None, "num_hidden_layers": None,
             "hidden_size": None, "vocab_size": None, "aliases": [], "config_sha256": None}
READINGS = {
    "specforge dflash": ("flat", "dflash", "dflash", {"num_aux_hidden_states": 5,
                                                      "capture_boundaries": [2, 10, 18, 26, 34],
                                                      "algorithm": {"block_size": 16}},
                         {**NO_TARGET, "num_hidden_layers": 36}, []),
    "specforge dspark": ("flat", "dspark", "dflash", {"num_aux_hidden_states": 5,
                                                      "capture_boundaries": [2, 10, 18, 26, 34],
                                                      "algorithm": {**SPECFORGE_DSPARK_NESTED, "block_size": 7,
                                                                    "sample_from_anchor": True}},
                         {**NO_TARGET, "num_hidden_layers": 36}, [SAMPLE_NOTE]),
    "speculators dflash": ("spec", "dflash", "speculators", {
        "num_aux_hidden_states": 3, "capture_boundaries": [2, 18, 34],
        "algorithm": {"block_size": 8, "sliding_window_non_causal": False, "sample_from_anchor": False}},
        {**NO_TARGET, "name_or_path": VERIFIER, "architectures": ["Qwen3ForCausalLM"]}, []),
    "speculators dspark": ("spec", "dspark", "speculators", {
        "num_aux_hidden_states": 3, "capture_boundaries": [2, 18, 34],
        "algorithm": {"block_size": 8, "sliding_window_non_causal": False, "sample_from_anchor": True,
                      **DSPARK_HEADS}},
        {**NO_TARGET, "name_or_path": VERIFIER, "architectures": ["Qwen3ForCausalLM"]}, []),
}


@pytest.mark.parametrize("case", READINGS)
def test_each_layout_reads_the_drafter_its_engines_build(tmp_path: Path, case: str):
    builder, kind, layout, fields, target, said = READINGS[case]
    src = (flat if builder == "flat" else spec)(tmp_path, kind)
    assert reading(src) == {"layout": layout, "config": {"kind": kind, **COMMON, **fields}, "target": target,
                            "notes": said}


# ------------------------------------------------------------------ what each writer writes


def flat_decoder(config: dict[str, Any]) -> dict[str, Any]:
    """The decoder config of a SpecForge file, as every writer spells it (mlp_bias written out)."""
    return {**{k: v for k, v in config.items() if k not in SPECFORGE_OWN}, "mlp_bias": False}


def expected_flat_from_specforge(source: dict[str, Any], kind: str) -> dict[str, Any]:
    out = {**source, "mlp_bias": False}
    if kind == "dspark":  # the fields vLLM and SGLang read at the top level, written there too
        out["dflash_config"] = {**source["dflash_config"], "sample_from_anchor": True}
        out.update(DSPARK_HEADS, sample_from_anchor=True, mask_token_id=MASK, target_layer_ids=[1, 9, 17, 25, 33])
    return out


def expected_speculators_from_specforge(source: dict[str, Any], kind: str) -> dict[str, Any]:
    algorithm = {k: v for k, v in source["dflash_config"].items() if k not in ("mask_token_id", "target_layer_ids")}
    if kind == "dspark":
        algorithm["sample_from_anchor"] = True
    # SpecForge's full-attention layers attend bidirectionally: update_dflash reads that from true (absent: true,
    # and speculators' own reading of full layers is bidirectional whatever the flag); DSpark's update writes no
    # causal, so the speculators library's default (false) is written
    algorithm["sliding_window_non_causal"] = kind == "dflash"
    return {
        "architectures": [SPECULATORS_CLASS[kind]], "speculators_model_type": kind, "speculators_version": "0.9.0",
        **algorithm, "block_size": source["block_size"], "dtype": "bfloat16",
        "speculators_config": {"algorithm": kind, "default_proposal_method": "greedy", "proposal_methods": [
            # the drafted tokens: DFlash's block less its anchor (16 - 1); DSpark samples from the anchor (7)
            {"accept_tolerance": 0.0, "proposal_type": "greedy", "speculative_tokens": 15 if kind == "dflash" else 7,
             "verifier_accept_k": 1}], "verifier": {"architectures": [], "name_or_path": VERIFIER}},
        "transformer_layer_config": flat_decoder(source), "draft_vocab_size": VOCAB, "target_hidden_size": None,
        "aux_hidden_state_layer_ids": [2, 10, 18, 26, 34], "mask_token_id": MASK}


def expected_flat_from_speculators(source: dict[str, Any], kind: str) -> dict[str, Any]:
    out = {**source["transformer_layer_config"], "attention_bias": False, "mlp_bias": False,
           "architectures": [FLAT_CLASS[kind]], "block_size": 8,
           # no causal: speculators trains full-attention layers bidirectionally whatever sliding_window_non_causal
           # says (attention.py), which is what vLLM and SGLang read of a flat file's full layers (layer_types)
           "dflash_config": {"mask_token_id": MASK, "sample_from_anchor": kind == "dspark",
                             "target_layer_ids": [1, 17, 33]}}
    if kind == "dspark":
        out["dflash_config"].update(DSPARK_HEADS)
        out.update(DSPARK_HEADS, sample_from_anchor=True, mask_token_id=MASK, target_layer_ids=[1, 17, 33])
    return out


def expected_speculators_from_speculators(source: dict[str, Any], kind: str) -> dict[str, Any]:
    out = {**source, "transformer_layer_config": {**source["transformer_layer_config"], "attention_bias": False,
                                                  "mlp_bias": False}}
    if kind == "dflash":  # false would make update_dflash's causal true for these full-attention layers
        out["sliding_window_non_causal"] = True
    return out


FLAG_NOTE = ("sliding_window_non_causal written as true, not false: vLLM's update_dflash applies it to every layer, "
             "and these layers attend bidirectionally within the draft block as trained")


WRITES = {  # source builder, destination -> (the config written, as a function of the source's; its notes)
    ("flat", "dflash"): (expected_flat_from_specforge, {"dflash": [], "dspark": [SAMPLE_NOTE, BOTH_PLACES_NOTE]}),
    ("flat", "speculators"): (expected_speculators_from_specforge, {"dflash": [], "dspark": [SAMPLE_NOTE]}),
    ("spec", "dflash"): (expected_flat_from_speculators, {"dflash": [], "dspark": [BOTH_PLACES_NOTE]}),
    ("spec", "speculators"): (expected_speculators_from_speculators, {"dflash": [FLAG_NOTE], "dspark": []}),
}


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
@pytest.mark.parametrize("builder, layout", WRITES)
def test_each_destination_writes_the_config_its_readers_read(tmp_path: Path, builder: str, layout: str, kind: str):
    """Every layout that holds a block-diffusion drafter, from both: the whole config.json, every tensor byte for
    byte under its own name, and the notes. Only a SpecForge file needs --verifier for speculators (a speculators
    file names its own, which is written back with its architectures)."""
    src = (flat if builder == "flat" else spec)(tmp_path, kind)
    args = ("--verifier", VERIFIER) if (builder, layout) == ("flat", "speculators") else ()
    result = convert(src, tmp_path / "out", "--to", layout, *args)
    assert result.exit_code == 0, result.stderr
    expected, said = WRITES[builder, layout]
    assert written(tmp_path / "out") == expected(written(src), kind)
    assert tensor_hashes(tmp_path / "out") == tensor_hashes(src)
    assert notes(result.stdout) == said[kind]


# ------------------------------------------------------------------ each refusal, word for word

def _ids_line(where: str, value: str) -> str:
    return (f"error: {where} is {value}: the target layers the drafter reads (vLLM and SGLang build it from them) "
            f"[E-CONFIG-FIELD] — hint: write {where} into config.json, as the drafter was trained")


def _mask_line(where: str, value: str, kind: str) -> str:
    return (f"error: {where} is {value}: a {LABEL[kind]} drafter fills its block with this token (vLLM's proposer "
            f"fails without it) [E-CONFIG-FIELD] — hint: write {where} into config.json (the token it was trained "
            "with)")


def _twice_line(key: str, inner: str, outer: str) -> str:
    return (f"error: dflash_config.{key} is {inner} but the top-level {key} is {outer} [E-CONFIG-FIELD] — hint: "
            "engines read one or the other: keep the trained value in both")


def _rank_line(value: str) -> str:
    return (f"error: markov_rank is {value}: DSpark's Markov head is sized by it [E-CONFIG-FIELD] — hint: write "
            "markov_rank into config.json, as the drafter was trained")


def _unbuilt_line(tensor: str, kind: str, key: str, value: str) -> str:
    return (f"error: tensor {tensor!r} belongs to a head this {LABEL[kind]} config does not build ({key} is {value}) "
            f"[E-KEY-UNUSED] — hint: engines drop such tensors silently; fix {key} or remove the tensor")


def _no_verifier_line(kind: str) -> str:
    return ("error: the speculators layout must name its verifier: speculators' from_pretrained loads a "
            f"{LABEL[kind]} drafter's embedding and head from it (load_verifier_weights), and this drafter does not "
            "say which it is [E-VERIFIER-MISSING] — hint: pass --verifier ORG/TARGET_MODEL (the model it was trained "
            "against)")


def _without(*prefixes: str) -> Callable[[dict[str, RawTensor]], dict[str, RawTensor]]:
    return lambda tensors: {n: t for n, t in tensors.items() if not n.startswith(prefixes)}


def _plus_markov_head(tensors: dict[str, RawTensor]) -> dict[str, RawTensor]:
    return {**tensors, "markov_head.markov_w1.weight": _tensor("w1", VOCAB, RANK)}


DFLASH_IDS, SPEC_IDS = "dflash_config.target_layer_ids", "aux_hidden_state_layer_ids"
# name -> (builder, kind, edits, the tensors saved instead, CLI arguments, the refusal)
REFUSALS: dict[str, tuple[str, str, tuple[Edit, ...], Any, tuple[str, ...], str]] = {
    "flat: no DFlash or DSpark class, read --from dflash": (
        "flat", "dflash", (top(architectures=["Qwen3ForCausalLM"]),), None, ("--from", "dflash"),
        "error: config.json has no kind named (EAGLE-3), not a DFlash, DSpark or DFlash2 architecture "
        "[E-CONFIG-ALGORITHM] — hint: the dflash layout holds DFlashDraftModel, DSparkDraftModel, DFlash2DraftModel "
        "drafters"),
    "flat: dflash_config no object": (
        "flat", "dflash", (top(dflash_config=[1, 2]),), None, (),
        "error: dflash_config is [1, 2] [E-CONFIG-FIELD] — hint: it must be an object"),
    "flat: no dflash_config": ("flat", "dflash", (drop("dflash_config"),), None, (), _ids_line(DFLASH_IDS, "None")),
    "flat: ids missing": ("flat", "dflash", (drop_nested("target_layer_ids"),), None, (),
                          _ids_line(DFLASH_IDS, "None")),
    "flat: ids empty": ("flat", "dflash", (nested(target_layer_ids=[]),), None, (), _ids_line(DFLASH_IDS, "[]")),
    "flat: ids a string": ("flat", "dflash", (nested(target_layer_ids="1,9"),), None, (),
                           _ids_line(DFLASH_IDS, "'1,9'")),
    "flat: an id a boolean": ("flat", "dflash", (nested(target_layer_ids=[True, 9, 17, 25, 33]),), None, (),
                              _ids_line(DFLASH_IDS, "[True, 9, 17, 25, 33]")),
    "flat: an id a float": ("flat", "dflash", (nested(target_layer_ids=[1, 9, 17, 25, 33.0]),), None, (),
                            _ids_line(DFLASH_IDS, "[1, 9, 17, 25, 33.0]")),
    "flat: ids in both places, two values": (
        "flat", "dflash", (top(target_layer_ids=[1, 9, 17, 25, 34]),), None, (),
        _twice_line("target_layer_ids", "[1, 9, 17, 25, 33]", "[1, 9, 17, 25, 34]")),
    "flat: mask token missing": ("flat", "dflash", (drop_nested("mask_token_id"),), None, (),
                                 _mask_line("dflash_config.mask_token_id", "None", "dflash")),
    "flat: mask token -1": ("flat", "dspark", (nested(mask_token_id=-1),), None, (),
                            _mask_line("dflash_config.mask_token_id", "-1", "dspark")),
    "flat: mask token a string": ("flat", "dflash", (nested(mask_token_id="509"),), None, (),
                                  _mask_line("dflash_config.mask_token_id", "'509'", "dflash")),
    "flat: mask token in both places, two values": (
        "flat", "dflash", (top(mask_token_id=MASK - 1),), None, (), _twice_line("mask_token_id", "509", "508")),
    "flat: block size in both places, two values": (
        "flat", "dflash", (nested(block_size=8),), None, (), _twice_line("block_size", "8", "16")),
    **{f"flat dspark: {key} in both places, two values": (
        "flat", "dspark", (nested(sample_from_anchor=True), top(**{key: other})), None, (),
        _twice_line(key, inner, repr(other)))
       for key, inner, other in (("markov_rank", "8", 2 * RANK), ("markov_head_type", "'vanilla'", "mlp"),
                                 ("enable_confidence_head", "True", False),
                                 ("confidence_head_with_markov", "True", False),
                                 ("sample_from_anchor", "True", False))},
    "flat: draft_vocab_size 0": ("flat", "dflash", (top(draft_vocab_size=0),), None, (),
                                 "error: draft_vocab_size is 0 [E-CONFIG-FIELD] — hint: set draft_vocab_size to the "
                                 "lm_head rows"),
    "flat: draft_vocab_size a string": ("flat", "dflash", (top(draft_vocab_size="128"),), None, (),
                                        "error: draft_vocab_size is '128' [E-CONFIG-FIELD] — hint: set "
                                        "draft_vocab_size to the lm_head rows"),
    "flat: a reduced vocabulary without its head": (
        "flat", "dspark", (top(draft_vocab_size=128),), None, (),
        "error: the drafter drafts 128 of 512 tokens but stores no lm_head.weight [E-KEY-MISSING] — hint: the "
        "verifier's full head cannot stand in for a reduced one (vLLM refuses: qwen3_dspark.py); add the drafter's "
        "lm_head"),
    "flat dspark: markov_rank missing": ("flat", "dspark", (drop_nested("markov_rank"),), None, (),
                                         _rank_line("None")),
    "flat dspark: markov_rank -1": ("flat", "dspark", (nested(markov_rank=-1),), None, (), _rank_line("-1")),
    "flat dspark: markov_rank a string": ("flat", "dspark", (nested(markov_rank="8"),), None, (), _rank_line("'8'")),
    "flat dspark: markov_rank a boolean": ("flat", "dspark", (nested(markov_rank=True),), None, (),
                                           _rank_line("True")),
    "flat dspark: rank 0, the Markov head stored": (
        "flat", "dspark", (nested(markov_rank=0),), None, (),
        _unbuilt_line("markov_head.markov_w1.weight", "dspark", "markov_rank", "0")),
    "flat dspark: no confidence head built, one stored": (
        "flat", "dspark", (nested(enable_confidence_head=False),), None, (),
        _unbuilt_line("confidence_head.proj.bias", "dspark", "enable_confidence_head", "False")),
    "flat dflash: a Markov head stored": (
        "flat", "dflash", (), _plus_markov_head, (),
        _unbuilt_line("markov_head.markov_w1.weight", "dflash", "markov_rank", "None")),
    "flat dflash: a Markov head stored, the rank named": (
        "flat", "dflash", (nested(markov_rank=RANK),), _plus_markov_head, (),
        _unbuilt_line("markov_head.markov_w1.weight", "dflash", "markov_rank", "8")),
    "flat dspark: the Markov head missing": (
        "flat", "dspark", (), _without("markov_head."), (),
        "error: markov_rank is 8 but no markov_head.* tensor is stored [E-KEY-MISSING] — hint: the checkpoint is "
        "incomplete: engines would build that head with random weights"),
    "flat dspark: the confidence head missing": (
        "flat", "dspark", (), _without("confidence_head."), (),
        "error: enable_confidence_head is True but no confidence_head.* tensor is stored [E-KEY-MISSING] — hint: the "
        "checkpoint is incomplete: engines would build that head with random weights"),
    "flat: to speculators without a verifier": ("flat", "dspark", (), None, ("--to", "speculators"),
                                                _no_verifier_line("dspark")),
    "flat: to speculators with a local verifier": (
        "flat", "dflash", (), None, ("--to", "speculators", "--verifier", "./qwen3"),
        "error: --verifier ./qwen3: no such directory, and no Hub repo id (ORG/NAME) [E-TARGET-MISSING] — hint: pass "
        "the target's Hub repo id, or the directory that holds its config.json"),
    "speculators: no transformer_layer_config": (
        "spec", "dspark", (drop("transformer_layer_config"),), None, (),
        "error: speculators config has no transformer_layer_config object [E-CONFIG-FIELD] — hint: a speculators "
        "DSpark config nests the drafter's decoder config there"),
    "speculators: transformer_layer_config no object": (
        "spec", "dflash", (top(transformer_layer_config=[1]),), None, (),
        "error: speculators config has no transformer_layer_config object [E-CONFIG-FIELD] — hint: a speculators "
        "DFlash config nests the drafter's decoder config there"),
    "speculators: ids missing": ("spec", "dflash", (drop(SPEC_IDS),), None, (), _ids_line(SPEC_IDS, "None")),
    "speculators: ids empty": ("spec", "dflash", (top(aux_hidden_state_layer_ids=[]),), None, (),
                               _ids_line(SPEC_IDS, "[]")),
    "speculators: mask token missing": ("spec", "dspark", (drop("mask_token_id"),), None, (),
                                        _mask_line("mask_token_id", "None", "dspark")),
    "speculators: mask token -1": ("spec", "dflash", (top(mask_token_id=-1),), None, (),
                                   _mask_line("mask_token_id", "-1", "dflash")),
    "speculators dspark: no sample_from_anchor": (
        "spec", "dspark", (drop("sample_from_anchor"),), None, (),
        "error: sample_from_anchor is absent: speculators' DSparkSpeculatorConfig reads it as true, vLLM's "
        "update_dspark as false, so the file names no single drafter [E-CONFIG-DEFAULTS-DIFFER] — hint: write "
        "sample_from_anchor (as the drafter was trained) into a copy of config.json and convert that"),
    "speculators: draft_vocab_size 0": ("spec", "dflash", (top(draft_vocab_size=0),), None, (),
                                        "error: draft_vocab_size is 0 [E-CONFIG-FIELD] — hint: set draft_vocab_size "
                                        "to the lm_head rows"),
    "speculators dspark: markov_rank missing": ("spec", "dspark", (drop("markov_rank"),), None, (),
                                                _rank_line("None")),
    "speculators dspark: no confidence head built, one stored": (
        "spec", "dspark", (top(enable_confidence_head=False),), None, (),
        _unbuilt_line("confidence_head.proj.bias", "dspark", "enable_confidence_head", "False")),
    "speculators: no verifier named, to speculators": (
        "spec", "dflash", (lambda c: c["speculators_config"].pop("verifier"),), None, ("--to", "speculators"),
        _no_verifier_line("dflash")),
    "speculators: a verifier with an empty name, to speculators": (
        "spec", "dspark", (lambda c: c["speculators_config"]["verifier"].update(name_or_path=""),), None,
        ("--to", "speculators"), _no_verifier_line("dspark")),
    "speculators: a verifier that is no object, to speculators": (
        "spec", "dflash", (lambda c: c["speculators_config"].update(verifier=VERIFIER),), None,
        ("--to", "speculators"), _no_verifier_line("dflash")),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_each_refusal_word_for_word(tmp_path: Path, case: str):
    builder, kind, edits, tensors, args, line = REFUSALS[case]
    src = flat(tmp_path, kind, *edits, tensors=tensors) if builder == "flat" else spec(tmp_path, kind, *edits)
    if "--to" not in args:
        args = (*args, "--to", "dflash")
    result = convert(src, tmp_path / "out", *args)
    assert refused(result) == line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ what a change reads as, and is written as

def test_fields_written_at_the_top_level_only_are_read_and_written_in_both_places(tmp_path: Path):
    """deepseek-ai's dense DSpark (and speculators' DSparkConverter, which reads it) writes the head fields, the ids
    and the mask token at the top level, not in dflash_config: the same drafter as SpecForge's nested spelling."""
    keys = ("target_layer_ids", "mask_token_id", *DSPARK_HEADS)
    src = flat(tmp_path, "dspark", *(lift(k) for k in keys))
    result = convert(src, tmp_path / "out", "--to", "dflash")
    assert result.exit_code == 0, result.stderr
    published = json.loads(specforge_drafter(tmp_path / "published", "dspark").joinpath("config.json").read_text())
    assert written(tmp_path / "out") == expected_flat_from_specforge(published, "dspark")


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_the_same_value_in_both_places_is_one_drafter(tmp_path: Path, kind: str):
    both = {"target_layer_ids": [1, 9, 17, 25, 33], "mask_token_id": MASK, "block_size": 16 if kind == "dflash" else 7}
    src = flat(tmp_path, kind, top(**both), nested(**both))
    result = convert(src, tmp_path / "out", "--to", "dflash")
    assert result.exit_code == 0, result.stderr
    published = json.loads(specforge_drafter(tmp_path / "published", kind).joinpath("config.json").read_text())
    # one copy, where each engine reads it: DFlash's in dflash_config only, DSpark's in both places
    assert written(tmp_path / "out") == expected_flat_from_specforge(published, kind)


def test_the_lowest_ids_and_mask_token_are_read(tmp_path: Path):
    """dflash_config id -1 is the embedding output (boundary 0; every reader takes hidden_states[id + 1]), and token
    0 is a token: both are read and carried."""
    src = flat(tmp_path, "dflash", nested(target_layer_ids=[-1, 9, 17, 25, 33], mask_token_id=0))
    result = convert(src, tmp_path / "out", "--to", "speculators", "--verifier", VERIFIER)
    assert result.exit_code == 0, result.stderr
    out = written(tmp_path / "out")
    assert (out["aux_hidden_state_layer_ids"], out["mask_token_id"]) == ([0, 10, 18, 26, 34], 0)
    back = convert(tmp_path / "out", tmp_path / "back", "--to", "dflash")
    assert back.exit_code == 0, back.stderr
    assert written(tmp_path / "back")["dflash_config"] == {"mask_token_id": 0, "target_layer_ids": [-1, 9, 17, 25, 33]}


def test_a_speculators_boundary_below_0_is_refused(tmp_path: Path):
    """Before: aux_hidden_state_layer_ids [-1, 18, 34] converted to the flat layout as target_layer_ids
    [-2, 17, 33] (hidden_states[-1] in z-lab's reader: the LAST layer), which this tool's own dflash reader then
    refuses, and the per-engine lines said vLLM and SGLang serve it 'as trained'. speculators' ids are boundaries:
    its converter writes a flat id + 1, so -1 (the embedding output) is 0."""
    src = spec(tmp_path, "dflash", ids=[-1, 18, 34])
    result = convert(src, tmp_path / "out", "--to", "dflash")
    assert refused(result) == (
        "error: aux_hidden_state_layer_ids [-1, 18, 34]: an id below 0 names no layer in the speculators convention "
        "[E-CAPTURE-RANGE] — hint: speculators ids are boundaries >= 0 (0: the embedding output): write the ids the "
        "drafter was trained on into a copy of config.json")
    assert not (tmp_path / "out").exists()
    flat_src = flat(tmp_path, "dflash", nested(target_layer_ids=[-2, 9, 17, 25, 33]), name="flat")
    assert refused(convert(flat_src, tmp_path / "out", "--to", "dflash")) == (
        "error: dflash_config.target_layer_ids [-2, 9, 17, 25, 33]: an id below -1 names no layer in the dflash "
        "convention [E-CAPTURE-RANGE] — hint: dflash ids are target layers >= -1 (-1: the embedding output; readers "
        "take hidden_states[id + 1]): write the ids the drafter was trained on into a copy of config.json")


@pytest.mark.parametrize("depth, written_depth", [(36, 36), (None, None), ("36", None), (0, None), (True, None)])
def test_the_target_depth_is_read_from_num_target_layers_only_as_a_positive_integer(tmp_path: Path, depth: Any,
                                                                                   written_depth: int | None):
    """SpecForge's num_target_layers is the target's depth: the last boundary a drafter may capture (id 35 is block 36
    of 36, id 36 no layer), and what the flat writer writes back; anything else says no depth."""
    edits = (drop("num_target_layers"),) if depth is None else (top(num_target_layers=depth),)
    src = flat(tmp_path, "dflash", *edits, nested(target_layer_ids=[1, 9, 17, 25, 35]))
    result = convert(src, tmp_path / "out", "--to", "dflash")
    assert result.exit_code == 0, result.stderr
    assert written(tmp_path / "out").get("num_target_layers") == written_depth
    assert reading(src)["target"] == (None if written_depth is None else {**NO_TARGET, "num_hidden_layers": 36})
    beyond = flat(tmp_path, "dflash", *edits, nested(target_layer_ids=[1, 9, 17, 25, 36]), name="beyond")
    result = convert(beyond, tmp_path / "beyond-out", "--to", "dflash")
    if written_depth is None:
        assert result.exit_code == 0, result.stderr
    else:
        assert refused(result) == (
            "error: capture boundaries [2, 10, 18, 26, 37] include [37], outside [0, 36] of the 36-layer target: no "
            "engine captures them [E-CAPTURE-RANGE] — hint: check --target is the model the drafter was trained for, "
            "and the ids' convention")


def test_sample_from_anchor_false_is_read_and_changes_the_drafted_tokens(tmp_path: Path):
    """A flat DSpark that says sample_from_anchor false (at the top level, where vLLM and SGLang read it): no note,
    and the block's anchor is not drafted (speculative_tokens 7 - 1)."""
    src = flat(tmp_path, "dspark", top(sample_from_anchor=False))
    result = convert(src, tmp_path / "out", "--to", "speculators", "--verifier", VERIFIER)
    assert result.exit_code == 0, result.stderr
    assert notes(result.stdout) == []
    out = written(tmp_path / "out")
    assert out["sample_from_anchor"] is False
    assert out["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 6
    flat_out = convert(src, tmp_path / "flat", "--to", "dflash")
    assert notes(flat_out.stdout) == [BOTH_PLACES_NOTE]
    assert written(tmp_path / "flat")["dflash_config"]["sample_from_anchor"] is False
    assert written(tmp_path / "flat")["sample_from_anchor"] is False


def test_without_a_block_size_neither_writer_names_one(tmp_path: Path):
    src = flat(tmp_path, "dflash", drop("block_size"))
    assert convert(src, tmp_path / "flat", "--to", "dflash").exit_code == 0
    assert "block_size" not in written(tmp_path / "flat")
    assert convert(src, tmp_path / "spec", "--to", "speculators", "--verifier", VERIFIER).exit_code == 0
    assert "block_size" not in written(tmp_path / "spec")


@pytest.mark.parametrize("builder", ["flat", "spec"])
def test_causality_is_carried_in_each_layouts_spelling(tmp_path: Path, builder: str):
    """vLLM reads a flat file's dflash_config.causal (SGLang its is_causal), and a speculators file's
    sliding_window_non_causal as its negation (update_dflash): each writer spells the same causality its way."""
    if builder == "flat":
        src = flat(tmp_path, "dflash", nested(causal=False))
        out = convert(src, tmp_path / "out", "--to", "speculators", "--verifier", VERIFIER)
        assert out.exit_code == 0, out.stderr
        assert written(tmp_path / "out")["sliding_window_non_causal"] is True
        assert "causal" not in written(tmp_path / "out")
    else:  # sliding layers trained bidirectionally: layer_types alone would make them causal
        src = spec(tmp_path, "dflash", top(sliding_window_non_causal=True), lambda c: c["transformer_layer_config"]
                   .update(layer_types=["sliding_attention"] * LAYERS, sliding_window=64))
        out = convert(src, tmp_path / "out", "--to", "dflash")
        assert out.exit_code == 0, out.stderr
        assert written(tmp_path / "out")["dflash_config"] == {"causal": False, "mask_token_id": MASK,
                                                              "sample_from_anchor": False,
                                                              "target_layer_ids": [1, 17, 33]}
        assert written(tmp_path / "out")["is_causal"] is False  # SGLang reads no dflash_config.causal


def test_a_flat_causal_beside_a_speculators_spelling_is_kept(tmp_path: Path):
    """A flat dflash_config holding both spellings: vLLM reads dflash_config.causal from a flat file, so it is the
    one the flat writer keeps."""
    src = flat(tmp_path, "dflash", nested(causal=False, sliding_window_non_causal=False))
    assert convert(src, tmp_path / "out", "--to", "dflash").exit_code == 0
    assert written(tmp_path / "out")["dflash_config"] == {"causal": False, "mask_token_id": MASK,
                                                          "target_layer_ids": [1, 9, 17, 25, 33]}


@pytest.mark.parametrize("layout", ["dflash", "speculators"])
def test_the_vocabulary_and_target_width_are_written_where_they_differ_from_the_decoders(tmp_path: Path, layout: str):
    """A draft vocabulary equal to the target's is not written to the flat file (vLLM reads vocab_size then), and
    speculators always names it; a target_hidden_size is written to both."""
    src = flat(tmp_path, "dflash", top(draft_vocab_size=VOCAB, target_hidden_size=64))
    args = ("--verifier", VERIFIER) if layout == "speculators" else ()
    assert convert(src, tmp_path / "out", "--to", layout, *args).exit_code == 0
    out = written(tmp_path / "out")
    assert out.get("draft_vocab_size") == (None if layout == "dflash" else VOCAB)
    assert out["target_hidden_size"] == 64


@pytest.mark.parametrize("layout", ["dflash", "speculators"])
def test_a_reduced_vocabulary_is_written_with_its_map(tmp_path: Path, layout: str):
    """The drafter's own head [128, H] and its d2t/t2d, to both layouts, under their own names."""
    src = spec(tmp_path, "dflash", draft_vocab=128)
    assert convert(src, tmp_path / "out", "--to", layout).exit_code == 0
    assert written(tmp_path / "out")["draft_vocab_size"] == 128
    assert tensor_hashes(tmp_path / "out") == tensor_hashes(src)
    assert {"d2t", "t2d", "lm_head.weight"} <= set(tensor_hashes(src))


def test_a_speculators_draft_vocab_size_left_out_is_the_decoders(tmp_path: Path):
    src = spec(tmp_path, "dflash", drop("draft_vocab_size"))
    assert reading(src)["config"]["draft_vocab_size"] == VOCAB
    assert convert(src, tmp_path / "out", "--to", "dflash").exit_code == 0
    assert "draft_vocab_size" not in written(tmp_path / "out")


def test_the_speculators_config_of_the_source_is_kept_and_its_verifier_renamed_by_verifier(tmp_path: Path):
    """Its own keys carried; the algorithm is the drafter's kind; --verifier replaces the verifier it names; a
    verifier's architectures that are no list are none."""
    src = spec(tmp_path, "dspark", lambda c: c["speculators_config"].update(algorithm="DSPARK", note="kept"),
               lambda c: c["speculators_config"]["verifier"].update(architectures="Qwen3ForCausalLM"))
    assert reading(src)["target"] == {**NO_TARGET, "name_or_path": VERIFIER}
    assert convert(src, tmp_path / "out", "--to", "speculators").exit_code == 0
    assert written(tmp_path / "out")["speculators_config"] == {
        "algorithm": "dspark", "default_proposal_method": "greedy", "note": "kept",
        "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 7}],
        "verifier": {"architectures": [], "name_or_path": VERIFIER}}
    assert convert(src, tmp_path / "other", "--to", "speculators", "--verifier", "org/other").exit_code == 0
    assert written(tmp_path / "other")["speculators_config"]["verifier"] == {"architectures": [],
                                                                             "name_or_path": "org/other"}


def test_the_save_keys_speculators_writes_at_the_top_level_are_carried(tmp_path: Path):
    src = spec(tmp_path, "dflash", top(dtype="bfloat16", transformers_version="4.57.0"))
    for layout in ("dflash", "speculators"):
        assert convert(src, tmp_path / layout, "--to", layout).exit_code == 0
        out = written(tmp_path / layout)
        assert (out["dtype"], out["transformers_version"]) == ("bfloat16", "4.57.0"), layout


def test_a_dspark_without_heads_is_read_when_its_config_builds_none(tmp_path: Path):
    """markov_rank 0 sizes no Markov head and enable_confidence_head false builds no confidence head: with neither
    stored, it is read and written (rank 0 is a rank)."""
    src = flat(tmp_path, "dspark", nested(markov_rank=0, enable_confidence_head=False),
               tensors=_without("markov_head.", "confidence_head."))
    result = convert(src, tmp_path / "out", "--to", "dflash")
    assert result.exit_code == 0, result.stderr
    assert (written(tmp_path / "out")["markov_rank"], written(tmp_path / "out")["enable_confidence_head"]) == (0, False)


# ------------------------------------------------------------------ detection

@pytest.mark.parametrize("builder, kind, layout, why", [
    ("flat", "dflash", "dflash", "config.json has architectures ['DFlashDraftModel']"),
    ("flat", "dspark", "dflash", "config.json has architectures ['DSparkDraftModel']"),
    ("spec", "dflash", "speculators", "config.json has speculators_model_type 'dflash'"),
    ("spec", "dspark", "speculators", "config.json has speculators_model_type 'dspark'"),
])
def test_detection_names_the_layout_and_why(tmp_path: Path, builder: str, kind: str, layout: str, why: str):
    """A speculators file names its class too, but speculators_model_type makes it speculators' alone (the dflash
    layout does not claim it, or the answer would be ambiguous)."""
    src = (flat if builder == "flat" else spec)(tmp_path, kind)
    report = json.loads(run_cli("inspect", "--json", src).stdout)
    assert (report["layout"], report["checked_as"], report["detected_by"]) == (layout, [layout], why)


def test_an_eagle3_drafter_is_not_claimed_by_the_dflash_layout(tmp_path: Path):
    from builders import DrafterSpec, build_drafter
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec())
    report = json.loads(run_cli("inspect", "--json", src).stdout)
    assert (report["layout"], report["checked_as"]) == ("sglang", ["sglang"])


@pytest.mark.parametrize("given, kind, why", [
    ("sglang", "dflash", "the sglang reader refuses it (E-CONFIG-FIELD): config.json has no draft_vocab_size"),
    ("speculators", "dspark", "the speculators reader refuses it (E-CONFIG-FIELD): speculators config has no "
                              "transformer_layer_config object"),
])
def test_detection_is_confident_so_another_from_is_refused(tmp_path: Path, given: str, kind: str, why: str):
    src = flat(tmp_path, kind)
    result = convert(src, tmp_path / "out", "--from", given, "--to", "dflash")
    assert refused(result) == (
        f"error: --from {given} cannot read it: the checkpoint is in the dflash layout (config.json has architectures "
        f"['{FLAT_CLASS[kind]}']); {why} [E-FROM-MISMATCH] — hint: drop --from, or pass --from dflash")


# ------------------------------------------------------------------ the decoder, the target, the sidecar

@pytest.mark.parametrize("builder, where", [("flat", "config.json"), ("spec", "transformer_layer_config")])
def test_a_decoder_refusal_names_where_the_decoder_is(tmp_path: Path, builder: str, where: str):
    """The flat layout's decoder is config.json itself, speculators' the nested transformer_layer_config."""
    if builder == "flat":
        src = flat(tmp_path, "dflash", top(num_hidden_layers=0))
    else:
        src = spec(tmp_path, "dflash", lambda c: c["transformer_layer_config"].update(num_hidden_layers=0))
    assert refused(convert(src, tmp_path / "out", "--to", "dflash")) == (
        f"error: {where}: num_hidden_layers is 0 [E-CONFIG-FIELD] — hint: a drafter has at least one layer")


def test_a_draft_vocabulary_of_one_token_is_read(tmp_path: Path):
    src = spec(tmp_path, "dflash", draft_vocab=1)
    result = convert(src, tmp_path / "out", "--to", "dflash")
    assert result.exit_code == 0, result.stderr
    assert written(tmp_path / "out")["draft_vocab_size"] == 1


def test_a_one_layer_target_is_a_depth(tmp_path: Path):
    """num_target_layers 1: ids -1 and 0 (the embedding output and the one block's) are boundaries 0 and 1 of it."""
    def two_states(tensors: dict[str, RawTensor]) -> dict[str, RawTensor]:
        return {**tensors, "fc.weight": _tensor("fc", H, 2 * H)}

    src = flat(tmp_path, "dflash", top(num_target_layers=1), nested(target_layer_ids=[-1, 0]), tensors=two_states)
    result = convert(src, tmp_path / "out", "--to", "dflash")
    assert result.exit_code == 0, result.stderr
    assert written(tmp_path / "out")["num_target_layers"] == 1
    assert reading(src)["target"] == {**NO_TARGET, "num_hidden_layers": 1}


def test_a_speculators_file_without_speculators_config_names_no_verifier(tmp_path: Path):
    src = spec(tmp_path, "dflash", drop("speculators_config"))
    assert reading(src)["target"] is None
    assert convert(src, tmp_path / "out", "--to", "dflash").exit_code == 0
    assert refused(convert(src, tmp_path / "spec", "--to", "speculators")) == _no_verifier_line("dflash")


def test_a_speculators_target_hidden_size_is_read(tmp_path: Path):
    src = spec(tmp_path, "dflash", top(target_hidden_size=H))
    assert convert(src, tmp_path / "out", "--to", "dflash").exit_code == 0
    assert written(tmp_path / "out")["target_hidden_size"] == H


def sidecar(dest: Path) -> dict[str, Any]:
    return json.loads((dest / "eagle3-convert.json").read_text())


@pytest.mark.parametrize("builder, edits, layout_extra", [
    ("flat", (), {"dflash": {"auto_map": {"AutoModel": "dflash.DFlashDraftModel"}}}),
    ("flat", (drop("auto_map"),), {}),
    # the verifier is the sidecar's target, not a speculators_config key kept for the way back
    ("spec", (), {"speculators": {"speculators_config": {
        "algorithm": "dflash", "default_proposal_method": "greedy",
        "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 7}]}}}),
])
def test_the_sidecar_keeps_what_only_the_source_layout_spells(tmp_path: Path, builder: str, edits: tuple,
                                                              layout_extra: dict):
    src = (flat if builder == "flat" else spec)(tmp_path, "dflash", *edits)
    args = ("--to", "speculators", "--verifier", VERIFIER) if builder == "flat" else ("--to", "dflash")
    assert convert(src, tmp_path / "out", *args).exit_code == 0
    assert sidecar(tmp_path / "out")["layout_extra"] == layout_extra


def test_the_flat_readers_notes_follow_the_readings_own(tmp_path: Path):
    """A DSpark that stores its own head and says tie_word_embeddings: the head note, then the sample_from_anchor
    one, neither lost."""
    src = flat(tmp_path, "dspark", top(tie_word_embeddings=True),
               tensors=lambda t: {**t, "lm_head.weight": _tensor("head", VOCAB, H)})
    assert reading(src)["notes"] == [
        "tie_word_embeddings is true but lm_head.weight is the drafter's own trained tensor: written false (a drafter "
        "never trains tied; SGLang would serve embed_tokens as its head)", SAMPLE_NOTE]


def test_a_flat_output_its_engines_would_serve_wrong_is_refused_naming_the_layout(tmp_path: Path):
    """SGLang skips a DSpark's lm_head. and drafts over the target's head: a reduced vocabulary is served wrong."""
    src = spec(tmp_path, "dspark", draft_vocab=128)
    assert refused(convert(src, tmp_path / "out", "--to", "dflash")) == (
        "error: the dflash layout is for vLLM (V1 runner), vLLM (V2 runner), SGLang, and SGLang would serve this file "
        "wrong: skips lm_head. and drafts over the target's 512-token head, not the drafter's 128 tokens "
        "[E-ENGINE-WRONG] — hint: convert to a layout whose engine serves the drafter as trained")  # (it named
    # `--to vllm`, an EAGLE-3 layout that refuses a DSpark: E-KIND-UNSUPPORTED)


MLA_WIDTHS = {"q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8}


def mla_layers(tensors: dict[str, RawTensor]) -> dict[str, RawTensor]:
    """The Qwen3 attention of each layer replaced by DeepSeek's MLA (tests/builders.py's shapes, every layer reading
    H: a block-diffusion layer is a plain decoder layer)."""
    q, kv, nope, rope, v = MLA_WIDTHS.values()
    out = {n: t for n, t in tensors.items() if ".self_attn." not in n}
    for i in range(2):
        p = f"layers.{i}.self_attn."
        for name, shape in (("q_a_proj.weight", (q, H)), ("q_a_layernorm.weight", (q,)),
                            ("q_b_proj.weight", (HEADS * (nope + rope), q)),
                            ("kv_a_proj_with_mqa.weight", (kv + rope, H)), ("kv_a_layernorm.weight", (kv,)),
                            ("kv_b_proj.weight", (HEADS * (nope + v), kv)), ("o_proj.weight", (H, HEADS * v))):
            out[p + name] = _tensor(p + name, *shape)
    return out


def test_an_mla_drafter_keeps_its_model_type_spelling(tmp_path: Path):
    """deepseek_v2 is the MLA family's, which this tool writes as kimi_k2 unless the source spells it otherwise."""
    src = flat(tmp_path, "dflash", top(model_type="deepseek_v2", **MLA_WIDTHS), tensors=mla_layers)
    result = convert(src, tmp_path / "out", "--to", "dflash")
    assert result.exit_code == 0, result.stderr
    assert written(tmp_path / "out")["model_type"] == "deepseek_v2"
    assert tensor_hashes(tmp_path / "out") == tensor_hashes(src)


# ------------------------------------------------------------------ converters/config_keys.py (session 8)

def test_modelopts_fields_in_a_foreign_eagle_config_are_known_there(tmp_path: Path):
    """config_keys looks into another layout's eagle_config for keys of ours misplaced there; ModelOpt's own nested
    fields are that object's, not strays (an unknown key beside them still is)."""
    from builders import DrafterSpec, build_drafter
    src = edited(build_drafter(tmp_path / "src", "eagle", DrafterSpec()),
                 top(eagle_config={"use_last_layernorm": True, "parallel_draft_step": 1, "my_x": 1}))
    report = json.loads(run_cli("validate", "--json", "--from", "eagle", src).stdout)
    assert [(f["code"], f["where"]) for f in report["findings"] if (f["where"] or "").startswith("$.eagle_config")] \
        == [("W-CONFIG-KEY-FOREIGN", "$.eagle_config"), ("W-CONFIG-KEY-UNKNOWN", "$.eagle_config.my_x")]


def test_a_local_verifier_a_file_names_is_written_as_it_is(tmp_path: Path):
    """A speculators DFlash file whose verifier is a local path: vLLM serves it through --speculative-config (only its
    `vllm serve DRAFTER` shortcut refuses the name), so it is converted, the path kept (issue 34: no false alarm)."""
    src = spec(tmp_path, "dflash", lambda c: c["speculators_config"]["verifier"].update(name_or_path="/models/qwen3"))
    assert convert(src, tmp_path / "out", "--to", "speculators").exit_code == 0
    assert written(tmp_path / "out")["speculators_config"]["verifier"]["name_or_path"] == "/models/qwen3"
