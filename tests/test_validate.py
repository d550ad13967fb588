"""`eagle3-convert validate`: one real file per finding code, made to fail exactly one check;
clean checkpoints of every layout; the hazard samples; the four failures of the motivating
story; header-only reads; `--deep`; the CLI.

Fixtures are written by tests/builders.py (the layouts spelled out independently of our
writers) or copied from tests/data, then changed by one edit of the real file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from builders import LAYOUTS, DrafterSpec, build_drafter, expected_refusal
from conftest import DATA, EXAMPLE, copy_sample, run_cli
from test_drafters_2026_block import speculators_drafter
from eagle3_convert.names import ENGINES
from eagle3_convert.convert import convert
from eagle3_convert.converters.checkpoint import load_checkpoint
from eagle3_convert.validate import (CODES, check_capture_record, load_target_facts, read_raw, scan_tensor,
                                     validate_checkpoint)
from eagle3_convert.errors import Eagle3Error
from eagle3_convert.provenance import Known
from eagle3_convert.safetensors_io import (InMemoryTensor, observe_reads, read_tensor_bytes, read_tensor_table,
                                           write_safetensors, write_tensor_files)
from hostile import hostile_cases

WEIGHTS = "model.safetensors"
IDS = "eagle_aux_hidden_state_layer_ids"


# ------------------------------------------------------------ real-file surgery

def tensors_of(path: Path) -> dict[str, InMemoryTensor]:
    table, _ = read_tensor_table(path)
    return {name: InMemoryTensor(ref.dtype, ref.shape, read_tensor_bytes(ref)) for name, ref in table.items()}


def edit_tensors(edit: Callable[[dict[str, InMemoryTensor]], None]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        tensors = tensors_of(path)
        edit(tensors)
        (path / WEIGHTS).unlink()
        write_safetensors(path / WEIGHTS, tensors)
    return apply


def edit_header(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    """Change header entries, keep the data bytes."""
    def apply(path: Path) -> None:
        blob = (path / WEIGHTS).read_bytes()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        edit(header)
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        (path / WEIGHTS).write_bytes(struct.pack("<Q", len(raw)) + raw + blob[8 + n:])
    return apply


def edit_config(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        config = json.loads((path / "config.json").read_text())
        edit(config)
        (path / "config.json").write_text(json.dumps(config, indent=2))
    return apply


def i64(values: list[int]) -> InMemoryTensor:
    return InMemoryTensor("I64", (len(values),), struct.pack(f"<{len(values)}q", *values))


def ints(t: InMemoryTensor) -> list[int]:
    return list(struct.unpack(f"<{len(t.data) // 8}q", t.data))


def shard(path: Path) -> None:
    """Split model.safetensors into two shards and an index."""
    tensors = tensors_of(path)
    (path / WEIGHTS).unlink()
    write_tensor_files(path, tensors, {"format": "pt"}, max_shard_bytes=sum(t.nbytes for t in tensors.values()) // 2)


def edit_index(edit: Callable[[Path, dict[str, Any]], None]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        index_path = path / "model.safetensors.index.json"
        index = json.loads(index_path.read_text())
        edit(path, index)
        index_path.write_text(json.dumps(index))
    return apply


def target(tmp: Path, **fields: Any):
    """A target config (default: what DrafterSpec's drafter was trained for) as validate reads it."""
    dest = tmp / f"target-{len(list(tmp.glob('target-*')))}"
    dest.mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 8,
              "hidden_size": 32, "vocab_size": 96, "max_position_embeddings": 2048, **fields}
    (dest / "config.json").write_text(json.dumps(config))
    return load_target_facts(str(dest))


def target_holding_the_embedding(tmp: Path, changed: bool = False, **fields: Any):
    """A target directory whose model.safetensors holds the drafter's (tmp/drafter) embed_tokens as its own (with
    `changed`, one byte of it changed: another table)."""
    facts = target(tmp, **fields)
    [root] = [Path(n) for n in facts.names if Path(n).is_dir()]
    table = tensors_of(tmp / "drafter")["embed_tokens.weight"]
    if changed:
        table = InMemoryTensor(table.dtype, table.shape, bytes([table.data[0] ^ 0x01]) + table.data[1:])
    write_safetensors(root / WEIGHTS, {"model.embed_tokens.weight": table})
    return load_target_facts(str(root))


def set_bf16(name: str, value_bits: int | None = None, all_bits: int | None = None) -> Callable[[Path], None]:
    """Overwrite the first element (value_bits) or every element (all_bits) of a BF16 tensor."""
    def edit(tensors: dict[str, InMemoryTensor]) -> None:
        t = tensors[name]
        data = bytearray(t.data)
        if all_bits is not None:
            data[:] = struct.pack("<H", all_bits) * (len(data) // 2)
        else:
            data[:2] = struct.pack("<H", value_bits)
        tensors[name] = InMemoryTensor(t.dtype, t.shape, bytes(data))
    return edit_tensors(edit)


# ------------------------------------------------------------ one case per code

@dataclass(frozen=True)
class Case:
    """A clean base checkpoint, and ONE change that must make `validate` report the code."""

    base: Callable[[Path], Path]
    change: Callable[[Path], None]
    options: Callable[[Path], dict[str, Any]] = lambda tmp: {}
    changed_options: Callable[[Path], dict[str, Any]] | None = None  # when the change is to the target, not the file
    also: frozenset[str] = frozenset()  # other errors/warnings the one change implies


def built(layout: str, **changes: Any) -> Callable[[Path], Path]:
    return lambda tmp: build_drafter(tmp / "drafter", layout, DrafterSpec(), **changes)


def converted(layout: str) -> Callable[[Path], Path]:
    """A built drafter converted by eagle3-convert (not recorded): it carries our sidecar."""
    def base(tmp: Path) -> Path:
        convert(str(build_drafter(tmp / "built", layout, DrafterSpec())), tmp / "drafter", layout)
        return tmp / "drafter"
    return base


def built_readable_by_both() -> Callable[[Path], Path]:
    """A vLLM-native file whose nested id copy is spelled as SGLang reads it (as eagle3-convert writes it)."""
    def base(tmp: Path) -> Path:
        path = build_drafter(tmp / "drafter", "vllm", DrafterSpec())
        edit_config(lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[1, 3, 4]))(path)
        return path
    return base


def from_sample(name: str) -> Callable[[Path], Path]:
    return lambda tmp: copy_sample(tmp, name)


def replace_with(name: str) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        shutil.rmtree(path)
        shutil.copytree(DATA / name / "checkpoint", path)
    return apply


def _speculators_bidirectional(dest: Path) -> Path:
    src = speculators_drafter(dest, "dflash", [2, 18, 34])
    edit_config(lambda c: c.__setitem__("sliding_window_non_causal", True))(src)
    return src


def with_engines(*names: str) -> Callable[[Path], dict[str, Any]]:
    return lambda tmp: {"engines": list(names)}


def add_tensor(name: str, tensor: InMemoryTensor) -> Callable[[Path], None]:
    return edit_tensors(lambda t: t.__setitem__(name, tensor))


def drop_tensor(*names: str) -> Callable[[Path], None]:
    return edit_tensors(lambda t: [t.pop(n) for n in names])


def _prefix_model(tensors: dict[str, InMemoryTensor]) -> None:
    for name in [n for n in tensors if n not in ("d2t", "t2d")]:
        tensors["model." + name] = tensors.pop(name)


def _layers_to_midlayer(tensors: dict[str, InMemoryTensor]) -> None:
    for name in [n for n in tensors if n.startswith("layers.0.")]:
        tensors["midlayer." + name[len("layers.0."):]] = tensors.pop(name)


def _d2t_absolute(tensors: dict[str, InMemoryTensor]) -> None:
    offsets = ints(tensors["d2t"])
    tensors["d2t"] = i64([i + o for i, o in enumerate(offsets)])


def _d2t_last_past_vocab(tensors: dict[str, InMemoryTensor]) -> None:
    offsets = ints(tensors["d2t"])
    tensors["d2t"] = i64(offsets[:-1] + [offsets[-1] + 1000])


def _d2t_repeat_first(tensors: dict[str, InMemoryTensor]) -> None:
    offsets = ints(tensors["d2t"])
    tensors["d2t"] = i64([offsets[0], offsets[0] - 1, *offsets[2:]])  # draft ids 0 and 1 -> one target id


def _d2t_one_longer(tensors: dict[str, InMemoryTensor]) -> None:
    offsets = ints(tensors["d2t"])
    tensors["d2t"] = i64(offsets + [offsets[-1]])


def _t2d_move_one(tensors: dict[str, InMemoryTensor]) -> None:
    mask = bytearray(tensors["t2d"].data)
    mask[mask.index(1)], mask[mask.index(0)] = 0, 1  # same popcount, another target id
    tensors["t2d"] = InMemoryTensor("BOOL", tensors["t2d"].shape, bytes(mask))


def _default_map(tensors: dict[str, InMemoryTensor]) -> None:
    """A trainer's default buffers: all-zero d2t beside t2d[:Vd] (the first Vd target ids)."""
    vd, v = tensors["d2t"].shape[0], tensors["t2d"].shape[0]
    tensors["d2t"] = i64([0] * vd)
    tensors["t2d"] = InMemoryTensor("BOOL", (v,), b"\x01" * vd + b"\x00" * (v - vd))


def _t2d_all_true(tensors: dict[str, InMemoryTensor]) -> None:
    tensors["t2d"] = InMemoryTensor("BOOL", tensors["t2d"].shape, b"\x01" * tensors["t2d"].nbytes)


def _all_norms_one(tensors: dict[str, InMemoryTensor]) -> None:
    for name, t in list(tensors.items()):
        if name.endswith("norm.weight"):
            tensors[name] = InMemoryTensor(t.dtype, t.shape, struct.pack("<H", 0x3F80) * (t.nbytes // 2))


def _overlap(header: dict[str, Any]) -> None:
    header["norm.weight"]["data_offsets"] = list(header["midlayer.input_layernorm.weight"]["data_offsets"])


def _ids(top: Any = "keep", nested: Any = "keep") -> Callable[[Path], None]:
    def edit(config: dict[str, Any]) -> None:
        if top != "keep":
            config[IDS] = top
        if nested != "keep":
            config.setdefault("eagle_config", {})[IDS] = nested
    return edit_config(edit)


def _index_extra(path: Path, index: dict[str, Any]) -> None:
    index["weight_map"]["ghost.weight"] = min(index["weight_map"].values())


def _index_missing_shard(path: Path, index: dict[str, Any]) -> None:
    (path / sorted(set(index["weight_map"].values()))[1]).unlink()


def _index_outside(path: Path, index: dict[str, Any]) -> None:
    second = sorted(set(index["weight_map"].values()))[1]
    (path / second).rename(path.parent / "outside.safetensors")
    index["weight_map"] = {k: ("../outside.safetensors" if v == second else v) for k, v in index["weight_map"].items()}


def _as_target_model(path: Path) -> None:
    """A plain transformers model where the drafter was: its config names no drafter, its weights are a decoder stack
    (model.layers.*) with no fc."""
    edit_tensors(lambda t: [t.__setitem__(f"model.layers.0.{n}", t.pop(n)) for n in list(t) if n != "fc.weight"]
                 and t.pop("fc.weight"))(path)
    edit_config(lambda c: (c.clear(), c.update(architectures=["LlamaForCausalLM"], model_type="llama",
                                               num_hidden_layers=8, hidden_size=32, vocab_size=96)))(path)


def sharded(layout: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = built(layout)(tmp)
        shard(path)
        return path
    return make


CASES: dict[str, Case] = {
    # files
    "E-SRC-MISSING": Case(built("sglang"), lambda p: (p / "config.json").unlink()),
    "E-SRC-EMPTY": Case(built("sglang"), edit_tensors(lambda t: t.clear())),
    "E-CONFIG-JSON": Case(built("sglang"), lambda p: (p / "config.json").write_bytes(b"[1, 2]")),
    "E-FILE-HEADER": Case(built("sglang"), edit_header(lambda h: h.__setitem__("norm.weight", [1, 2]))),
    "E-FILE-DTYPE": Case(built("sglang"), edit_header(lambda h: h["norm.weight"].__setitem__("dtype", "Q4_K"))),
    "E-FILE-OFFSETS": Case(built("sglang"), edit_header(_overlap)),
    "E-FILE-TRUNCATED": Case(from_sample("specforge-sglang"), replace_with("h6-truncated")),
    "E-FILE-INDEX": Case(sharded("sglang"), edit_index(_index_extra)),
    "E-FILE-MISSING": Case(sharded("sglang"), edit_index(_index_missing_shard)),
    "E-FILE-PATH": Case(sharded("sglang"), edit_index(_index_outside)),
    # layout and config
    "E-SRC-IS-TARGET": Case(built("sglang"), lambda p: _as_target_model(p)),
    "E-LAYOUT-UNKNOWN": Case(built("sglang"), edit_config(lambda c: c.__setitem__("architectures",
                                                                                    ["MistralForCausalLM"]))),
    # checked as SGLang too, which does not read the vLLM file's norm_before_residual
    "E-LAYOUT-AMBIGUOUS": Case(built_readable_by_both(), edit_tensors(_layers_to_midlayer),
                               also=frozenset({"W-CONFIG-KEY-FOREIGN"})),
    "E-SCHEMA": Case(built("speculators"), edit_config(lambda c: c.__setitem__("speculators_version", 9))),
    # built("eagle") writes safetensors with midlayer.* names: detection says sglang, and reads it the same
    "E-FROM-MISMATCH": Case(built("eagle", capture_boundaries=None), edit_config(
        lambda c: c.__setitem__("norm_output", False)), lambda tmp: {"from_layout": "eagle"},
        also=frozenset({"W-CONFIG-KEY-FOREIGN"})),
    "E-CONFIG-KEY-TYPO": Case(built("sglang"), edit_config(
        lambda c: c.__setitem__("eagle_confg", c.pop("eagle_config")))),
    "E-CONFIG-KEY-PLACE": Case(built("sglang"), edit_config(
        lambda c: c.__setitem__("use_aux_hidden_state", c["eagle_config"].pop("use_aux_hidden_state")))),
    "W-CONFIG-KEY-UNKNOWN": Case(built("sglang"), edit_config(lambda c: c.__setitem__("my_notes", "run 7"))),
    "W-CONFIG-KEY-FOREIGN": Case(built("speculators"), edit_config(lambda c: c.__setitem__("use_aux_norm", False))),
    "E-CONFIG-FIELD": Case(built("speculators"), edit_config(lambda c: c.__setitem__("transformer_layer_config", []))),
    # (a flat config's family follows its architecture: only speculators' nested decoder names it by model_type)
    "E-DRAFT-UNSERVED": Case(built("sglang", family="deepseek_mla", target_model_type="deepseek_v3"),
                             edit_config(lambda c: c.update(mla_use_nope=True))),
    "E-CONFIG-FAMILY": Case(built("speculators"), edit_config(
        lambda c: c["transformer_layer_config"].__setitem__("model_type", "mistral"))),
    "E-CONFIG-ARCH": Case(built("vllm", capture_boundaries=None), edit_config(
        lambda c: c.__setitem__("architectures", ["Eagle3Qwen3ForCausalLM"])), with_engines("sglang")),
    # issue 22: a DFlash drafter as speculators saves it (what validate covers for the kind, said of every one),
    # its full-attention layers bidirectional to vLLM too (false: update_dflash makes them causal, E-ENGINE-WRONG)
    "I-KIND-BLOCK-DIFFUSION": Case(lambda tmp: _speculators_bidirectional(tmp / "drafter"),
                                   edit_config(lambda c: c.update(block_size=16))),
    # a P-EAGLE drafter (SpecForge's PEagleDraftModel) without the mask token vLLM's parallel drafting needs
    "E-ENGINE-REFUSES": Case(built("vllm", peagle_mask_token_id=7), edit_config(lambda c: c.pop("pard_token"))),
    "E-CONFIG-DRAFT-VOCAB": Case(built("sglang"), edit_config(lambda c: c.pop("draft_vocab_size"))),
    "E-CONFIG-TARGET-HIDDEN-NULL": Case(built("sglang"), edit_config(lambda c: c.__setitem__("target_hidden_size",
                                                                                             None))),
    "W-CONFIG-DEFAULTS-DIFFER": Case(built("speculators"), edit_config(lambda c: c.pop("norm_before_residual"))),
    "W-CONFIG-CONTEXT": Case(built("speculators"), edit_config(
        lambda c: c["transformer_layer_config"].__setitem__("max_position_embeddings", 1024)),
        lambda tmp: {"target": target(tmp)}),
    # speculators trains a sliding window through layer_types; SGLang applies one only from a server flag (issue 22)
    "W-ENGINE-CAVEAT": Case(built("sglang", capture_boundaries=None), edit_config(
        lambda c: c.update(sliding_window=16, layer_types=["sliding_attention"]))),
    "E-ENGINE-UNSUPPORTED": Case(built("vllm", capture_boundaries=None), edit_config(
        lambda c: c.__setitem__("norm_before_residual", True)), with_engines("sglang")),
    # tensors
    "E-KEY-MISSING": Case(built("speculators"), drop_tensor("layers.0.mlp.up_proj.weight")),
    # SGLang skips a name that matches no parameter; vLLM's loader raises on a model. prefix (issue 22)
    "E-KEY-DROPPED": Case(built("sglang"), edit_tensors(
        lambda t: t.__setitem__("model.lm_head.weight", t.pop("lm_head.weight")))),
    "E-KEY-REFUSED": Case(built("vllm"), edit_tensors(_prefix_model)),
    "E-KEY-UNAPPLIED": Case(built("sglang", num_layers=2, capture_boundaries=None),
                            drop_tensor("layers.1.input_layernorm.weight"), with_engines("vllm")),
    "E-KEY-UNKNOWN": Case(built("speculators"), add_tensor("backdoor.weight", InMemoryTensor("BF16", (4,), b"\0" * 8))),
    "E-KEY-UNUSED": Case(built("speculators"), add_tensor("fc_norm.0.weight", InMemoryTensor("BF16", (32,),
                                                                                             b"\x80\x3f" * 32))),
    # a SpecForge fork's layer >= 1: input_layernorm trained, hidden_norm never applied (all ones): a warning; vLLM
    # applies the trained one (llama_eagle3.py), SGLang the untrained one (E-ENGINE-WRONG when judged, issue 34)
    "W-KEY-UNTRAINED-TWIN": Case(built("sglang", num_layers=2, capture_boundaries=None), edit_tensors(
        lambda t: t.__setitem__("layers.1.hidden_norm.weight", InMemoryTensor("BF16", (32,), b"\x80\x3f" * 32))),
        with_engines("vllm")),
    "E-KEY-DUPLICATE": Case(built("sglang"), edit_tensors(
        lambda t: t.__setitem__("layers.0.input_layernorm.weight", t["midlayer.input_layernorm.weight"]))),
    "E-SHAPE": Case(built("speculators"), edit_header(
        lambda h: h["layers.0.mlp.down_proj.weight"].__setitem__("shape", [64, 32]))),
    "E-SHAPE-FC": Case(built("speculators"), edit_header(lambda h: h["fc.weight"].__setitem__("shape", [64, 48]))),
    "E-TARGET-HIDDEN-SIZE": Case(built("speculators"), edit_config(lambda c: c.__setitem__("target_hidden_size", 40))),
    "E-DTYPE": Case(built("speculators"), edit_header(lambda h: h["norm.weight"].__setitem__("dtype", "I16"))),
    # vocabulary map
    "E-VOCAB-MISSING": Case(built("speculators"), drop_tensor("d2t", "t2d")),
    "E-VOCAB-SHAPE": Case(built("speculators"), edit_tensors(_d2t_one_longer)),
    "E-VOCAB-DTYPE": Case(built("speculators"), edit_header(lambda h: h["t2d"].__setitem__("dtype", "I8"))),
    "E-VOCAB-T2D": Case(built("speculators"), edit_tensors(_t2d_all_true)),
    "E-VOCAB-ABSOLUTE": Case(built("modelopt"), edit_tensors(_d2t_absolute), with_engines("trtllm")),
    "E-VOCAB-MISMATCH": Case(built("speculators"), edit_tensors(_t2d_move_one)),
    "E-VOCAB-RANGE": Case(built("modelopt"), edit_tensors(_d2t_last_past_vocab), with_engines("trtllm")),
    "E-VOCAB-ORDER": Case(built("modelopt"), edit_tensors(_d2t_repeat_first), with_engines("trtllm")),
    "W-VOCAB-DEFAULT": Case(built("speculators"), edit_tensors(_default_map)),
    "E-VOCAB-NO-T2D": Case(built("speculators"), drop_tensor("t2d")),
    "E-VOCAB-NO-D2T": Case(built("sglang"), drop_tensor("d2t")),
    # capture layers
    "E-CAPTURE-FIELD": Case(built("speculators"), edit_config(lambda c: c.__setitem__(IDS, "2,4,5"))),
    "E-CAPTURE-COUNT": Case(built("speculators"), _ids(top=[2, 4])),
    "E-CAPTURE-RANGE": Case(built("speculators"), _ids(top=[2, 4, 9]), lambda tmp: {"target": target(tmp)}),
    "E-CAPTURE-UNREACHABLE": Case(built("sglang", capture_boundaries=(2, 4, 7)), _ids(nested=[1, 3, 7]),
                                  lambda tmp: {"target": target(tmp)}),
    "E-CAPTURE-UNEXPRESSIBLE": Case(built("vllm"), _ids(top=[1, 3, 5], nested=[1, 3, 5]), lambda tmp: {
        "engines": ["sglang"], "target": target(tmp, model_type="deepseek_v3",
                                                architectures=["DeepseekV3ForCausalLM"])}),
    "E-CAPTURE-MISMATCH": Case(built("vllm", capture_boundaries=None), _ids(top=[2, 4, 5], nested=[2, 4, 5]),
                               with_engines("sglang")),
    "E-CAPTURE-EMBEDDING": Case(built("vllm", capture_boundaries=None), _ids(top=[0, 4, 5], nested=[0, 4, 5]),
                                with_engines("sglang")),
    "E-CAPTURE-FC-BYPASSED": Case(built("sglang"), edit_config(
        lambda c: c["eagle_config"].__setitem__("use_aux_hidden_state", False))),
    # the sidecar our converter wrote beside it records the trained layers: what a CLI user has (issue 21)
    "E-CAPTURE-RECORD": Case(converted("sglang"), _ids(top=[2, 4, 6], nested=[1, 3, 5])),
    # the sidecar beside it (written with the config before) records the norm flags: a config flipping one (issue 21)
    "E-RECORD-CONFLICT": Case(converted("speculators"), edit_config(
        lambda c: c.update(norm_before_residual=not c.get("norm_before_residual", False)))),
    # ... and names the verifier: a config naming another, that no fact tells apart from it (issue 33)
    "W-TARGET-UNTOLD": Case(converted("speculators"), edit_config(
        lambda c: c["speculators_config"]["verifier"].update(name_or_path="org/other-model"))),
    # SGLang ignores a top-level list. (vLLM's V1 runner reading a nested block-output list one off is an error,
    # E-CAPTURE-MISMATCH: issue 22's one rule, tests/test_drafters_2026.py)
    "W-CAPTURE-IDS-IGNORED": Case(built("vllm", capture_boundaries=None), _ids(top=[2, 4, 5]),
                                  with_engines("sglang")),
    "W-CAPTURE-CONVENTION": Case(built("vllm"), _ids(nested=[3, 5, 6])),  # SGLang: boundaries [4, 6, 7]
    "I-CAPTURE-DEFAULT": Case(built("speculators"), _ids(top=None)),
    "I-CAPTURE-RUNTIME": Case(built("modelopt"), lambda p: None, with_engines("trtllm")),
    # ModelOpt's exporter default (eagle_export_rope_scaling), injected into drafters trained without scaling
    "I-ROPE-EXPORT-YARN": Case(built("modelopt"), edit_config(lambda c: c.update(rope_scaling={
        "rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 2048}))),
    # llama.cpp's converter reads only the top-level list: nested non-default ids become its defaults.
    "E-ENGINE-WRONG": Case(built("sglang"), _ids(nested=[0, 3, 4]), with_engines("llamacpp")),
    # engine releases (issue 23): SGLang 0.5.12+ builds two layers, 0.5.11 and older refuse them
    "I-ENGINE-RELEASES": Case(built("sglang", num_layers=2), lambda p: None, with_engines("sglang")),
    # an engine judged by its module alone (mlx-vlm reads a speculators drafter that stores its own embedding)
    "I-ENGINE-READING": Case(built("speculators", embed_tokens=True), lambda p: None, with_engines("mlx-vlm")),
    # TensorRT-LLM's sources read have no P-EAGLE mode: no verdict, said (issue 22)
    "W-ENGINE-UNKNOWN": Case(built("vllm", peagle_mask_token_id=7), lambda p: None, with_engines("vllm"),
                             with_engines("trtllm")),
    "W-ENGINE-RELEASE-UNKNOWN": Case(built("sglang"), lambda p: None, with_engines("sglang"),
                                     lambda tmp: {"engines": ["sglang"], "releases": {"sglang": ["0.9.0"]}}),
    # the target
    "E-TARGET-HIDDEN": Case(built("speculators"), lambda p: None, lambda tmp: {"target": target(tmp)},
                            lambda tmp: {"target": target(tmp, hidden_size=64)}),
    "E-TARGET-VOCAB": Case(built("speculators"), lambda p: None, lambda tmp: {"target": target(tmp)},
                           lambda tmp: {"target": target(tmp, vocab_size=128)}),
    "W-TARGET-FAMILY": Case(built("speculators"), lambda p: None, lambda tmp: {"target": target(tmp)},
                            lambda tmp: {"target": target(tmp, architectures=["Qwen3ForCausalLM"],
                                                          model_type="qwen3")}),
    # issue 35: the target's own embedding (a copy, or another table: TorchSpec #38) and RoPE
    "I-EMBED-TARGET-COPY": Case(built("sglang", embed_tokens=True), lambda p: None,
                                lambda tmp: {"target": target_holding_the_embedding(tmp)}),
    "W-EMBED-NOT-TARGET": Case(built("sglang", embed_tokens=True), lambda p: None,
                               lambda tmp: {"target": target_holding_the_embedding(tmp)},
                               lambda tmp: {"target": target_holding_the_embedding(tmp, changed=True)}),
    "W-ROPE-SPELLINGS": Case(built("sglang"), edit_config(lambda c: c.update(
        rope_theta=500000.0, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}))),
    "W-ROPE-TARGET": Case(built("sglang"), lambda p: None, lambda tmp: {"target": target(tmp)},
                          lambda tmp: {"target": target(tmp, rope_theta=500000.0)}),
    # --deep (on a peer sample: its weights are real random floats, finite and not at init values)
    "E-DEEP-NONFINITE": Case(from_sample("specforge-sglang"), set_bf16("fc.weight", value_bits=0x7FC0),
                             lambda tmp: {"deep": True}),
    "E-DEEP-ZERO": Case(from_sample("specforge-sglang"), set_bf16("fc.weight", all_bits=0),
                        lambda tmp: {"deep": True}),
    "W-DEEP-INIT-NORMS": Case(from_sample("specforge-sglang"), edit_tensors(_all_norms_one),
                              lambda tmp: {"deep": True}),
}


def problems(report) -> set[str]:
    return report.codes("error", "warning")


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_finding_code_on_a_file_failing_exactly_one_check(code: str, tmp_path: Path):
    case = CASES[code]
    path = case.base(tmp_path)
    options = case.options(tmp_path)
    before = validate_checkpoint(path, **options)
    assert not before.codes("error"), f"base not clean: {[f.message for f in before.findings]}"
    if CODES[code][0] != "info":
        assert code not in before.codes()

    case.change(path)
    after = validate_checkpoint(path, **(case.changed_options(tmp_path) if case.changed_options else options))
    hits = [f for f in after.findings if f.code == code]
    assert hits, f"{code} not reported; got {[(f.code, f.message) for f in after.findings]}"
    assert {f.severity for f in hits} == {CODES[code][0]}
    assert all(f.message and (f.hint or f.severity == "info") for f in hits)
    assert problems(after) - {code} - case.also <= problems(before), \
        f"the one change also gave {[(f.code, f.message) for f in after.findings if f.code != code]}"
    assert after.failed() == (CODES[code][0] == "error")


def test_every_finding_code_is_exercised():
    """Each code checks.py can report has a case above (the parametrized test runs each)."""
    assert set(CASES) == set(CODES)


def test_codes_say_their_severity():
    for code, (severity, what) in CODES.items():
        assert code[0] == severity[0].upper() and what


# ------------------------------------------------------------ clean checkpoints

SPECS = [
    DrafterSpec(),
    DrafterSpec(draft_vocab_size=None),
    DrafterSpec(capture_boundaries=None),
    DrafterSpec(num_aux=2, capture_boundaries=(2, 5)),
    DrafterSpec(num_layers=2),
    DrafterSpec(family="qwen3"),
    DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3"),
    DrafterSpec(norm_before_residual=True, norm_before_fc=True, norm_output=True),
    DrafterSpec(fc_norm=True),
    DrafterSpec(target_hidden_size=48),
    DrafterSpec(attention_bias=True),
    DrafterSpec(embed_tokens=True, capture_boundaries=(0, 4, 7)),
    DrafterSpec(modelopt_hf_trained=True),
]


def _spec_id(spec: DrafterSpec) -> str:
    default = DrafterSpec()
    changed = [f"{k}={getattr(spec, k)}" for k in spec.__dataclass_fields__ if getattr(spec, k) != getattr(default, k)]
    return ",".join(changed) or "default"


# Only the (layout, drafter) pairs the layout can hold; test_layouts_matrix checks the refusals.
HOLDABLE = [pytest.param(layout, spec, id=f"{layout}-{_spec_id(spec)}")
            for spec in SPECS for layout in LAYOUTS if expected_refusal(layout, spec) is None]


@pytest.mark.parametrize("layout, spec", HOLDABLE)
def test_a_clean_checkpoint_of_every_layout_yields_no_error(layout: str, spec: DrafterSpec, tmp_path: Path):
    path = build_drafter(tmp_path / "d", layout, spec)
    facts = target(tmp_path, hidden_size=spec.ht, vocab_size=spec.vocab_size, num_hidden_layers=spec.target_layers,
                   model_type=spec.target_model_type)
    # Detected (an EAGLE safetensors checkpoint may read as SGLang's: the same files), and as written.
    for options in ({}, {"target": facts}, {"from_layout": layout}, {"from_layout": layout, "target": facts}):
        report = validate_checkpoint(path, **options)
        assert not report.codes("error"), [(f.code, f.engine, f.message) for f in report.findings]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_our_own_writers_output_validates_clean(layout: str, tmp_path: Path):
    dest = tmp_path / layout
    assert run_cli("--to", layout, EXAMPLE, dest, "--target", DATA / "targets" / "llama-tiny").exit_code == 0
    report = validate_checkpoint(dest, target=load_target_facts(str(DATA / "targets" / "llama-tiny")))
    assert report.layout == layout
    assert not report.codes("error"), [(f.code, f.message) for f in report.findings]


@pytest.mark.parametrize("name", ["specforge-sglang", "speculators-trained", "speculators-fullvocab-qwen3",
                                  "eagle-original"])
def test_peer_written_samples_validate_clean(name: str):
    report = validate_checkpoint(DATA / name / "checkpoint",
                                 target=load_target_facts(str(DATA / "targets" / "llama-tiny")), deep=True)
    assert report.findings == [] or report.codes("error", "warning") == set(), \
        [(f.code, f.message) for f in report.findings]


# ------------------------------------------------------------ hazard samples

HAZARD_CODES = {
    "h2-d2t-absolute": {"E-VOCAB-ABSOLUTE"},
    "h4-missing-lm_head": {"E-KEY-MISSING"},
    "h6-truncated": {"E-FILE-TRUNCATED"},
    "h8-sglang-ids-toplevel-only": {"W-CAPTURE-IDS-IGNORED", "W-CAPTURE-CONVENTION"},
}
# h8's manifest (shared/samples, copied verbatim) says warning; issue 34 made the layout ambiguity it shows an error,
# as convert refuses the file: SGLang and vLLM read its ids as other layers, and which were trained is unknown
SEVERITY_SINCE = {"h8-sglang-ids-toplevel-only": "error"}


@pytest.mark.parametrize("name", sorted(HAZARD_CODES))
def test_hazard_samples_yield_the_finding_their_manifest_names(name: str):
    manifest = json.loads((DATA / name / "manifest.json").read_text())
    for options in ({}, {"target": load_target_facts(str(DATA / "targets" / "llama-tiny"))}):
        report = validate_checkpoint(DATA / name / "checkpoint", **options)
        assert HAZARD_CODES[name] <= report.codes(manifest["severity"]), [(f.code, f.message) for f in report.findings]
        worst = "error" if report.count("error") else "warning" if report.count("warning") else "info"
        assert worst == SEVERITY_SINCE.get(name, manifest["severity"])


def test_hazard_messages_carry_the_manifest_facts():
    def messages(name: str) -> str:
        return " ".join(f.message for f in validate_checkpoint(DATA / name / "checkpoint").findings)

    assert "24 of 128 entries >= 512" in messages("h2-d2t-absolute")  # the manifest's count
    assert "lm_head.weight [128, 64]" in messages("h4-missing-lm_head")
    truncated = messages("h6-truncated")
    assert "133120" in truncated and "66560" in truncated and "'midlayer.mlp.gate_proj.weight'" in truncated
    h8 = messages("h8-sglang-ids-toplevel-only")
    assert "[1, 3, 4]" in h8 and "[2, 4, 5]" in h8  # vLLM's verbatim reading vs SGLang's meaning


def test_the_repair_the_hint_offers_gives_a_clean_checkpoint(tmp_path: Path):
    report = validate_checkpoint(DATA / "h2-d2t-absolute" / "checkpoint", source_label="h2")
    hint = next(f.hint for f in report.findings if f.code == "E-VOCAB-ABSOLUTE")
    assert "eagle3-convert --repair-d2t-absolute --to sglang h2 h2-sglang" in hint
    dest = tmp_path / "repaired"
    assert run_cli("--repair-d2t-absolute", "--to", "sglang", DATA / "h2-d2t-absolute" / "checkpoint",
                   dest).exit_code == 0
    assert validate_checkpoint(dest).findings == []


HINTED = [  # (layout, spec changes, edit of the file, engines, the finding whose hint names a command)
    ("speculators", {}, drop_tensor("t2d"), None, "E-VOCAB-NO-T2D"),
    ("sglang", {}, drop_tensor("d2t"), None, "E-VOCAB-NO-D2T"),
    ("vllm", {}, None, ["sglang"], "E-CAPTURE-MISMATCH"),
    ("vllm", {"capture_boundaries": (0, 4, 5)}, None, ["sglang"], "E-CAPTURE-EMBEDDING"),
    ("speculators", {}, None, ["sglang"], "E-CONFIG-ARCH"),
    ("vllm", {"norm_before_residual": True}, None, ["sglang"], "E-ENGINE-UNSUPPORTED"),
    ("sglang", {"num_aux": 1, "capture_boundaries": (4,)}, None, None, "E-CAPTURE-FC-BYPASSED"),
    ("modelopt", {}, None, ["vllm"], "W-CAPTURE-IDS-IGNORED"),
]


@pytest.mark.parametrize("layout,changes,edit,engines,code", HINTED, ids=[h[-1] for h in HINTED])
def test_the_command_a_hint_names_fixes_the_finding(layout, changes, edit, engines, code, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    path = build_drafter(tmp_path / "drafter", layout, DrafterSpec(), **changes)
    if edit:
        edit(path)
    [hint] = {f.hint for f in validate_checkpoint(path, engines=engines, source_label="drafter").findings
              if f.code == code}
    command = re.search(r"`eagle3-convert ([^`]+)`", hint).group(1).split()
    assert run_cli(*command).exit_code == 0
    fixed = validate_checkpoint(tmp_path / command[-1])
    assert code not in fixed.codes() and not fixed.codes("error"), [(f.code, f.message) for f in fixed.findings]


# ------------------------------------------------------------ the motivating story

def test_story_weights_under_a_prefix_the_engine_drops(tmp_path: Path):
    # vLLM prepends model. itself and its AutoWeightsLoader raises on model.model. (llama_eagle3.py, models/utils.py
    # in 0.33.0; checked with vLLM's own AutoWeightsLoader): a loud refusal, once per file (issue 22)
    vllm = build_drafter(tmp_path / "vllm", "vllm", DrafterSpec())
    edit_tensors(_prefix_model)(vllm)
    findings = validate_checkpoint(vllm).findings
    refused = [f for f in findings if f.code == "E-KEY-REFUSED"]
    assert [f.engine for f in refused] == ["vllm"] and "E-KEY-DROPPED" not in {f.code for f in findings}
    assert refused[0].where == "model.fc.weight"

    sglang = build_drafter(tmp_path / "sglang", "sglang", DrafterSpec())
    edit_tensors(lambda t: t.__setitem__("model.lm_head.weight", t.pop("lm_head.weight")))(sglang)
    report = validate_checkpoint(sglang)
    assert [(f.code, f.where, f.engine) for f in report.findings] == [
        ("E-KEY-DROPPED", "model.lm_head.weight", "sglang")]
    # SGLang does load model.layers.*: the same prefix on a layer is no finding.
    sglang2 = build_drafter(tmp_path / "sglang2", "sglang", DrafterSpec(num_layers=2))
    edit_tensors(lambda t: [t.__setitem__("model." + n, t.pop(n)) for n in list(t) if n.startswith("layers.")])(sglang2)
    assert validate_checkpoint(sglang2).codes() <= {"I-ENGINE-RELEASES"}  # 0.5.11 and older refuse two layers


def test_story_d2t_in_the_wrong_encoding_without_t2d(tmp_path: Path):
    """ModelOpt writes no t2d: absolute ids are still recognised from d2t alone."""
    path = build_drafter(tmp_path / "d", "modelopt", DrafterSpec())
    edit_tensors(_d2t_absolute)(path)
    found = [f for f in validate_checkpoint(path).findings if f.code == "E-VOCAB-ABSOLUTE"]
    assert found and "looks like absolute target ids" in found[0].message


def test_story_fc_bypassed_when_k_times_ht_equals_h(tmp_path: Path):
    path = build_drafter(tmp_path / "d", "sglang", DrafterSpec(num_aux=1, capture_boundaries=(4,)))
    report = validate_checkpoint(path)
    assert report.codes("error") == {"E-CAPTURE-FC-BYPASSED"}
    assert "k*Ht == H=32" in report.findings[0].message
    # vLLM applies fc whatever the incoming width: the bypass is SGLang's.
    assert "E-CAPTURE-FC-BYPASSED" not in validate_checkpoint(path, engines=["vllm"]).codes()


def test_story_training_taps_on_the_embedding_against_three_block_outputs(tmp_path: Path):
    # A vLLM config trained with the embedding tap, served by SGLang: it reads the nested copy as block outputs.
    path = build_drafter(tmp_path / "d", "vllm", DrafterSpec(capture_boundaries=(0, 4, 5)))
    found = [f for f in validate_checkpoint(path, engines=["sglang"]).findings if f.code == "E-CAPTURE-EMBEDDING"]
    assert found and "[1, 5, 6]" in found[0].message and "id -1" in found[0].hint
    # An SGLang config listing three block outputs against a training record that includes the embedding.
    sglang = build_drafter(tmp_path / "s", "sglang", DrafterSpec(capture_boundaries=(1, 4, 5)))
    report = validate_checkpoint(sglang, known=[Known("the registry record", [0, 4, 5])])
    assert "E-CAPTURE-EMBEDDING" in report.codes("error")


def test_capture_record_hook():
    assert check_capture_record([2, 4, 5], [5, 2, 4], "the registry") == []
    assert check_capture_record(None, [2, 4, 5], "the registry") == []  # nothing to compare without the depth
    [found] = check_capture_record([2, 4, 6], [2, 4, 5], "the registry record of drafter abc")
    assert found.code == "E-CAPTURE-RECORD" and "abc" in found.message
    [embedding] = check_capture_record([1, 4, 5], [0, 4, 5], "the registry")
    assert embedding.code == "E-CAPTURE-EMBEDDING"


def test_default_capture_on_a_deepseek_target_and_the_last_block(tmp_path: Path):
    """SGLang can capture neither -1 on DeepSeek-family targets nor the last block's output anywhere."""
    mla = build_drafter(tmp_path / "mla", "sglang", DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3"))
    edit_config(lambda c: c["eagle_config"].__setitem__(IDS, [-1, 3, 4]))(mla)
    deepseek = target(tmp_path, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"])
    assert "E-CAPTURE-UNREACHABLE" in validate_checkpoint(mla, target=deepseek).codes("error")
    vllm = build_drafter(tmp_path / "v", "vllm", DrafterSpec(capture_boundaries=(2, 4, 8)))
    report = validate_checkpoint(vllm, engines=["vllm", "sglang"], target=target(tmp_path))
    assert {(f.code, f.engine) for f in report.findings if f.severity == "error"} == {
        ("E-CAPTURE-UNREACHABLE", "sglang")}


# ------------------------------------------------------------ reads

@pytest.mark.parametrize("name", ["specforge-sglang", "h2-d2t-absolute", "speculators-trained", "h6-truncated"])
def test_header_level_validation_reads_no_tensor_data_but_the_vocab_maps(name: str):
    reads: list[tuple[str, bool]] = []
    stop = observe_reads(lambda ref, whole: reads.append((ref.name, whole)))
    try:
        validate_checkpoint(DATA / name / "checkpoint", engines=list(ENGINES),
                            target=load_target_facts(str(DATA / "targets" / "llama-tiny")))
    finally:
        stop()
    assert {n for n, _ in reads} <= {"d2t", "t2d"}
    assert all(whole for _, whole in reads)
    if name != "h6-truncated":  # its t2d is cut: the map is not decoded at all
        assert {n for n, _ in reads} == {"d2t", "t2d"}


def test_deep_reads_every_tensor_once_in_chunks_and_matches_the_sample_manifest():
    reads: list[tuple[str, bool]] = []
    stop = observe_reads(lambda ref, whole: reads.append((ref.name, whole)))
    try:
        report = validate_checkpoint(DATA / "h4-missing-lm_head" / "checkpoint", deep=True)
    finally:
        stop()
    manifest = json.loads((DATA / "h4-missing-lm_head" / "manifest.json").read_text())["tensors"]
    streamed = sorted(n for n, whole in reads if not whole)
    assert streamed == sorted(manifest)
    assert {n for n, whole in reads if whole} <= {"d2t", "t2d"}
    assert {name: entry["sha256"] for name, entry in report.manifest.items()} == \
        {name: entry["sha256"] for name, entry in manifest.items()}
    assert all(entry["file"] == WEIGHTS for entry in report.manifest.values())


def test_deep_skips_the_tensors_a_truncated_file_cuts():
    report = validate_checkpoint(DATA / "h6-truncated" / "checkpoint", deep=True)
    assert "midlayer.mlp.gate_proj.weight" not in report.manifest
    assert "fc.weight" in report.manifest
    assert report.codes("error") == {"E-FILE-TRUNCATED"}


@pytest.mark.parametrize("dtype,pack,finite,nonfinite,one", [
    ("BF16", "<H", 0x3F00, [0x7F80, 0xFF80, 0x7FC1], 0x3F80),
    ("F16", "<H", 0x3800, [0x7C00, 0xFC00, 0x7E00], 0x3C00),
    ("F32", "<I", 0x3F000000, [0x7F800000, 0xFF800000, 0x7FC00000], 0x3F800000),
    ("F64", "<Q", 0x3FE0000000000000, [0x7FF0000000000000, 0xFFF8000000000000], 0x3FF0000000000000),
    ("F8_E4M3", "<B", 0x30, [0x7F, 0xFF], 0x38),
    ("F8_E5M2", "<B", 0x38, [0x7C, 0xFC, 0x7E], 0x3C),
])
def test_deep_scan_decodes_every_float_format(dtype: str, pack: str, finite: int, nonfinite: list[int], one: int):
    def tensor(values: list[int]) -> InMemoryTensor:
        return InMemoryTensor(dtype, (len(values),), b"".join(struct.pack(pack, v) for v in values))

    largest_finite = {"BF16": 0x7F7F, "F16": 0x7BFF, "F32": 0x7F7FFFFF, "F64": 0x7FEFFFFFFFFFFFFF,
                      "F8_E4M3": 0x7E, "F8_E5M2": 0x7B}[dtype]
    clean = scan_tensor(tensor([finite, largest_finite, largest_finite | (1 << (struct.calcsize(pack) * 8 - 1))]),
                        check_ones=True)
    assert not clean.nonfinite and not clean.all_zero and not clean.all_ones
    for bits in nonfinite:
        assert scan_tensor(tensor([finite, bits]), check_ones=False).nonfinite, hex(bits)
    negative_zero = 1 << (struct.calcsize(pack) * 8 - 1)
    assert scan_tensor(tensor([0, negative_zero]), check_ones=False).all_zero
    assert scan_tensor(tensor([one] * 5), check_ones=True).all_ones
    assert not scan_tensor(tensor([one, finite]), check_ones=True).all_ones


# ------------------------------------------------------------ broken files: findings, never a crash

CODE_ALIASES = {"E-CONFIG-FIELD": {"E-SCHEMA", "E-CONFIG-DRAFT-VOCAB"}}  # validate names the field more precisely


@pytest.mark.parametrize("case", hostile_cases(), ids=lambda c: c.name)
def test_every_hostile_checkpoint_yields_its_finding(case, tmp_path: Path):
    src = tmp_path / "src"
    case.build(src)
    try:
        codes = validate_checkpoint(src).codes("error")
    except Eagle3Error as exc:  # only a SRC that is no directory at all is refused before any check
        assert not src.is_dir()
        codes = {exc.code}
    accepted = set(case.codes).union(*(CODE_ALIASES.get(c, set()) for c in case.codes))
    assert codes & accepted, f"{case.breaks}: got {sorted(codes)}, expected one of {sorted(case.codes)}"


# ------------------------------------------------------------ the CLI

def test_cli_exit_codes_grouping_and_strict(tmp_path: Path):
    clean = run_cli("validate", DATA / "specforge-sglang" / "checkpoint")
    assert clean.exit_code == 0 and "OK: 0 errors" in clean.stdout and clean.stderr == ""

    broken = run_cli("validate", DATA / "h2-d2t-absolute" / "checkpoint")
    assert broken.exit_code == 1
    assert "errors (1)" in broken.stdout and "E-VOCAB-ABSOLUTE" in broken.stdout
    assert broken.stderr.count("\n") == 1 and "[E-VOCAB-ABSOLUTE] — hint: " in broken.stderr
    assert "Traceback" not in broken.stdout + broken.stderr

    h8 = DATA / "h8-sglang-ids-toplevel-only" / "checkpoint"
    warned = run_cli("validate", "--from", "sglang", h8)  # read as SGLang's: warnings only
    assert warned.exit_code == 0
    assert warned.stdout.index("warnings (") < warned.stdout.index("OK:")
    assert run_cli("validate", "--strict", "--from", "sglang", h8).exit_code == 1

    mixed = build_drafter(tmp_path / "mixed", "speculators", DrafterSpec(capture_boundaries=None))
    edit_config(lambda c: c.pop("norm_before_residual"))(mixed)
    drop_tensor("t2d")(mixed)
    out = run_cli("validate", mixed).stdout
    assert out.index("errors (") < out.index("warnings (") < out.index("info (")


def test_cli_json_is_machine_readable():
    h8 = DATA / "h8-sglang-ids-toplevel-only" / "checkpoint"
    result = run_cli("validate", "--json", "--target", DATA / "targets" / "llama-tiny", h8)
    data = json.loads(result.stdout)
    assert result.exit_code == 1 and data["ok"] is False  # the layout is ambiguous (E-LAYOUT-AMBIGUOUS)
    assert data["engines"] == ["sglang", "vllm"] and data["checked_as"] == ["sglang", "vllm"]
    assert data["counts"]["error"] == 1 and data["counts"]["warning"] >= 2
    for f in data["findings"]:
        assert set(f) == {"code", "severity", "message", "hint", "where", "engine"}
        assert f["severity"] == CODES[f["code"]][0]
    # Served by vLLM as an SGLang file, the top-level list is read verbatim: one layer off.
    forced = run_cli("validate", "--json", "--engine", "vllm", "--target", DATA / "targets" / "llama-tiny", h8)
    mismatch = [f for f in json.loads(forced.stdout)["findings"] if f["code"] == "E-CAPTURE-MISMATCH"]
    assert forced.exit_code == 1 and mismatch and mismatch[0]["engine"] == "vllm"
    assert "[1, 3, 4]" in mismatch[0]["message"] and "[2, 4, 5]" in mismatch[0]["message"]


def test_cli_deep_prints_the_manifest():
    result = run_cli("validate", "--deep", "--json", DATA / "specforge-sglang" / "checkpoint")
    manifest = json.loads(result.stdout)["manifest"]
    expected = json.loads((DATA / "specforge-sglang" / "manifest.json").read_text())["tensors"]
    assert {n: e["sha256"] for n, e in manifest.items()} == {n: e["sha256"] for n, e in expected.items()}
    human = run_cli("validate", "--deep", DATA / "specforge-sglang" / "checkpoint").stdout
    assert f"{expected['fc.weight']['sha256']}  fc.weight" in human


def test_cli_bad_source_is_one_line():
    result = run_cli("validate", "/nonexistent/drafter-dir")
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_cli_validates_a_hub_repo_from_the_offline_cache(tmp_path: Path):
    """SRC as a repo id, resolved from the standard HF cache with HF_HUB_OFFLINE=1 (no network)."""
    commit = "a" * 40
    repo = tmp_path / "hub" / "models--example-org--tiny-drafter"
    shutil.copytree(DATA / "h4-missing-lm_head" / "checkpoint", repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "eagle3_convert", "validate", "--json", "example-org/tiny-drafter"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["source"].startswith("example-org/tiny-drafter")
    assert "E-KEY-MISSING" in {f["code"] for f in data["findings"]}


def test_deep_reports_progress_over_every_byte(tmp_path: Path):
    from conftest import EXAMPLE

    totals: list[int] = []
    seen: list[int] = []

    def progress(total: int):
        totals.append(total)
        return seen.append

    report = validate_checkpoint(EXAMPLE, deep=True, progress=progress)
    weights = (EXAMPLE / "model.safetensors").stat().st_size
    assert len(totals) == 1 and 0 < totals[0] < weights  # the data section: the file less its header
    assert sum(seen) == totals[0] and report.manifest


@pytest.mark.parametrize("from_layout", ["auto", "speculators"])
def test_inspect_reads_a_checkpoint_once(tmp_path: Path, from_layout: str) -> None:
    """What inspect does: read_raw reads the files once; validate detects, decodes the vocab map and runs the layout
    reader on that one Checkpoint, and convert's reader then gets the same Checkpoint and the same reading."""
    from eagle3_convert.convert import read_source

    src = build_drafter(tmp_path / "d", "speculators")
    raw, found = read_raw(src)
    assert found == []
    report = validate_checkpoint(src, from_layout=from_layout, read=(raw, list(found)))
    assert not report.failed()
    ckpt = raw.checkpoint()
    assert ckpt.detection is not None and list(ckpt.vocab_maps) == [(96, 32)]
    assert [name for name, _, _ in ckpt.readings] == ["speculators"]
    source = read_source(str(src), from_layout, load=raw.load)
    assert source.drafter is ckpt.readings[0][2] and len(ckpt.readings) == 1
    # hint planning gets a Checkpoint of its own, of the same reading: its conversions never meet inspect's drafter
    fresh = raw.load(fresh=True)
    assert fresh is not ckpt and fresh.tensors.keys() == ckpt.tensors.keys() and not fresh.readings


def test_a_refused_from_reads_the_layout_once(tmp_path: Path) -> None:
    """`inspect --from sglang` of a speculators file: validate's judgement of --from, its checks and its last word,
    then convert's reader, all ask the sglang reader, which reads (and refuses) the file once."""
    from eagle3_convert.convert import read_source

    src = build_drafter(tmp_path / "d", "speculators")
    raw, found = read_raw(src)
    report = validate_checkpoint(src, from_layout="sglang", read=(raw, list(found)))
    assert "E-FROM-MISMATCH" in report.codes("error")
    with pytest.raises(Eagle3Error) as refused:
        read_source(str(src), "sglang", load=raw.load)
    assert refused.value.code == "E-FROM-MISMATCH" and "the sglang reader refuses it" in refused.value.message
    [(name, _, reading)] = raw.checkpoint().readings
    assert name == "sglang" and isinstance(reading, Eagle3Error) and reading.code == "E-CONFIG-FIELD"


def test_a_refusal_is_passed_on_not_read_again(tmp_path: Path) -> None:
    """Where read_raw meets a problem, what convert refuses the files with (inspect's verdict, publish, the hints'
    plans) is taken from what read_raw read: the files are not opened again."""
    from eagle3_convert.convert import read_source

    src = build_drafter(tmp_path / "d", "speculators")
    (src / "config.json").write_text("{")
    raw, found = read_raw(src)
    assert [f.code for f in found] == ["E-CONFIG-JSON"] and raw.refusal.code == "E-CONFIG-JSON"
    shutil.rmtree(src)  # read again, it would now be E-SRC-MISSING
    for fresh in (False, True):
        with pytest.raises(Eagle3Error) as refused:
            read_source(str(tmp_path), load=lambda path: raw.load(path, fresh))
        assert refused.value is raw.refusal
    report = validate_checkpoint(src, read=(raw, list(found)))
    assert report.codes("error") == {"E-CONFIG-JSON"}


def test_read_raw_refuses_in_load_checkpoints_words(tmp_path: Path) -> None:
    """RawCheckpoint.refusal, what inspect, publish and the hints' plans refuse a broken checkpoint with, is the
    refusal load_checkpoint (convert) reads the same files into, word for word, on every hostile checkpoint."""
    refused = 0
    for case in hostile_cases():
        src = tmp_path / case.name
        case.build(src)
        try:
            load_checkpoint(src)
            expected = None
        except Eagle3Error as exc:
            expected = (type(exc), exc.code, exc.message, exc.hint)
        try:
            raw, found = read_raw(src)
        except Eagle3Error as exc:  # a GGUF, or no directory: read_raw raises load_checkpoint's refusal itself
            assert (type(exc), exc.code, exc.message, exc.hint) == expected, case.name
            continue
        got = raw.refusal
        assert (got and (type(got), got.code, got.message, got.hint)) == expected, case.name
        assert bool(found) == (got is not None), case.name
        refused += got is not None
    assert refused > 100  # of 152: the rest read cleanly (the layout reader or a check finds what is wrong)
