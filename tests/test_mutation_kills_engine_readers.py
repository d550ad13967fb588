"""Mutation survivors of the engine modules (issue 26, session 7: engines/llamacpp.py, engines/__init__.py,
block_diffusion.py, mlxvlm.py, lmdeploy.py), killed: each test pins what a user sees of an engine's reading or
verdict (the code, the message, the release named, the ids captured) on files the independent builders write
(tests/builders.py, tests/test_drafters_2026_block.py's SpecForge and speculators files), through the real CLI or
the engine modules' own entry points (`engines.read_all`, `engines.serve_verdicts`) as validate and convert call
them."""

from __future__ import annotations

import dataclasses
import json

from eagle3_convert.engines import TargetContext, read_all

RECORD = "eagle3_convert.record"  # the GGUF key of our record (converters/gguf_file.py)
GGUF_META = {"general.architecture": "eagle3", "eagle3.target_layers": [2, 4, 5], "eagle3.block_count": 1}
GGUF_NAMES = ["blk.0.attn_norm.weight", "blk.0.attn_norm_2.weight", "blk.0.attn_q.weight", "d2t", "fc.weight"]


# ------------------------------------------------------------------ engines/llamacpp.py

def test_a_gguf_record_that_is_json_but_no_object_is_read_as_no_record():
    """A GGUF whose eagle3_convert.record holds JSON that is no object (a list, a number: another tool's, or cut
    by hand) carries no trained window: llama.cpp's reading is the plain one, not a crash of validate."""
    for text in ("[1, 2]", "7", '"text"'):
        config = {"gguf": {**GGUF_META, RECORD: text}}
        reading = read_all(config, GGUF_NAMES, TargetContext("default", 8), engines=("llamacpp",))["llamacpp"]
        assert dataclasses.asdict(reading) == {
            "engine": "llamacpp", "label": "llama.cpp (GGUF)", "refusal": None, "family": "llama", "kind": "eagle3",
            "captures": [2, 4, 5], "from_default": False, "runtime": False,
            "flags": {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False,
                      "norm_output": False},
            "silent": [], "caveats": [], "undecided": {}}, text
