"""Rebuild the two broken copies of examples/tiny-llama-speculators that "Try the mistakes" (docs/validate.md) uses,
each converted against examples/tiny-llama-target (its sidecar records capture boundaries [2, 4, 5]):

- broken-ids-off-by-one (speculators): config.json's ids edited to [1, 3, 4], each one lower: the slip of a
  hand-copied list from a trainer that counts block outputs.
- broken-sglang-layers0 (SGLang): the decoder layer's tensors renamed from `midlayer.*` to `layers.0.*`, as a
  vLLM-style export writes them: SGLang reads that name from 0.5.12 (PR 24663) and skips it before, serving
  a randomly initialised layer.

Their sidecars name the copies as `local:NAME` (as a published one does), never a path of this machine.

    python examples/make_broken.py
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
from pathlib import Path

from eagle3_convert.convert import convert, make_options

HERE = Path(__file__).resolve().parent
DRAFTER, TARGET = HERE / "tiny-llama-speculators", HERE / "tiny-llama-target"
CREATED_AT = "2026-01-01T00:00:00+00:00"  # fixed: the same bytes every run


def converted(layout: str, name: str) -> Path:
    out = HERE / name
    with tempfile.TemporaryDirectory() as tmp:  # written beside nothing it could replace by mistake
        staged = Path(tmp) / name
        convert(str(DRAFTER), staged, layout, options=make_options(target=str(TARGET)))
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(staged, out)
    sidecar = out / "eagle3-convert.json"
    facts = json.loads(sidecar.read_text())
    for edge in facts["lineage"]:
        edge["created_at"] = CREATED_AT
        for end in (edge["source"], edge["dest"]):
            end["uri"] = f"local:{Path(end['uri']).name}"
    facts["converted_from"]["uri"] = f"local:{DRAFTER.name}"
    sidecar.write_text(json.dumps(facts, indent=2) + "\n")
    return out


def ids_off_by_one() -> None:
    out = converted("speculators", "broken-ids-off-by-one")
    config = json.loads((out / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = [i - 1 for i in config["eagle_aux_hidden_state_layer_ids"]]
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def sglang_layers0() -> None:
    out = converted("sglang", "broken-sglang-layers0")
    weights = out / "model.safetensors"
    blob = weights.read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    # Only the names change: the data offsets count from the end of the header, whatever its length.
    renamed = json.dumps({name.replace("midlayer.", "layers.0.", 1): v for name, v in header.items()},
                         separators=(",", ":")).encode()
    renamed += b" " * (-len(renamed) % 8)
    weights.write_bytes(struct.pack("<Q", len(renamed)) + renamed + blob[8 + size:])


if __name__ == "__main__":
    ids_off_by_one()
    sglang_layers0()
    print(f"wrote {HERE / 'broken-ids-off-by-one'} and {HERE / 'broken-sglang-layers0'}")
