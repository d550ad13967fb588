"""Load checkpoints with SpecForge 0.2.0 `AutoDraftModel.from_pretrained`; report what it loaded.

    python load_specforge.py CKPT_DIR [CKPT_DIR ...]

`specforge.modeling.auto` imports no sglang, yunchang or triton, so torch + transformers suffice.
"""

from __future__ import annotations

import sys

import _peer
import torch


def load(ckpt: str) -> dict:
    from specforge.modeling.auto import AutoDraftModel

    model, info = AutoDraftModel.from_pretrained(ckpt, output_loading_info=True)
    report = {
        **_peer.state_report(model),
        "loading_info": {"missing_keys": sorted(info["missing_keys"]),
                         "unexpected_keys": sorted(info["unexpected_keys"]),
                         "mismatched_keys": sorted(str(m) for m in info["mismatched_keys"]),
                         "error_msgs": [str(e) for e in info["error_msgs"]]},
    }
    # the vocab map as SpecForge holds it: d2t offsets and the draft ids t2d marks
    report["d2t"] = model.d2t.tolist()
    report["t2d_true"] = torch.nonzero(model.t2d).flatten().tolist()
    return report


if __name__ == "__main__":
    _peer.run_jobs(sys.argv[1:], load, {"versions": _peer.versions("specforge", "transformers", "torch")})
