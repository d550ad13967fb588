"""Rebuild examples/broken-ids-off-by-one, the broken copy of examples/tiny-llama-speculators that the README's
"Try the mistakes" uses: converted to speculators against examples/tiny-llama-target (its sidecar records
capture boundaries [2, 4, 5]), then config.json's ids edited to [1, 3, 4], each one lower: the slip of a
hand-copied list from a trainer that counts block outputs. Its sidecar names the copies as `local:NAME` (as a
published one does), never a path of this machine.

    python examples/make_broken.py
"""

from __future__ import annotations

import json
import shutil
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


if __name__ == "__main__":
    ids_off_by_one()
    print(f"wrote {HERE / 'broken-ids-off-by-one'}")
