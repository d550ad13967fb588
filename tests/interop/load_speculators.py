"""Load checkpoints with speculators 0.9.0 `SpeculatorModel.from_pretrained`; report what it loaded.

    python load_speculators.py VERIFIER_DIR CKPT_DIR [CKPT_DIR ...]

The checkpoint's config is read with its kind's config class (Eagle3SpeculatorConfig, or
DFlash2SpeculatorConfig for `speculators_model_type: dflash2`) and its verifier pointed at VERIFIER_DIR in memory (the files stay untouched), since speculators loads the verifier's
embed_tokens / lm_head / norm at load time.

`SpeculatorModel.from_pretrained(..., output_loading_info=True)` crashes on the tuple HF returns,
so transformers' own LoadStateDictInfo is observed by wrapping the real
`PreTrainedModel._finalize_model_loading` for the duration of the call.
"""

from __future__ import annotations

import sys

import _peer


def load(verifier: str, ckpt: str) -> dict:
    import json
    from pathlib import Path

    from speculators import SpeculatorModel
    from speculators.models.dflash2 import DFlash2SpeculatorConfig
    from speculators.models.eagle3 import Eagle3SpeculatorConfig
    from transformers import PreTrainedModel

    kind = json.loads((Path(ckpt) / "config.json").read_text()).get("speculators_model_type")
    config_class = DFlash2SpeculatorConfig if kind == "dflash2" else Eagle3SpeculatorConfig
    config = config_class.from_pretrained(ckpt)
    config.speculators_config.verifier.name_or_path = verifier

    captured = []
    original = PreTrainedModel.__dict__["_finalize_model_loading"]

    def observe(model, load_config, loading_info):
        result = original.__func__(model, load_config, loading_info)
        captured.append(result)
        return result

    PreTrainedModel._finalize_model_loading = staticmethod(observe)
    try:
        model = SpeculatorModel.from_pretrained(ckpt, config=config)
    finally:
        PreTrainedModel._finalize_model_loading = original

    info = captured[-1] if captured else None
    return {
        **_peer.state_report(model),
        "loading_info": None if info is None else {
            "missing_keys": sorted(info.missing_keys), "unexpected_keys": sorted(info.unexpected_keys),
            "mismatched_keys": sorted(str(m) for m in info.mismatched_keys)},
    }


if __name__ == "__main__":
    verifier_dir, *ckpts = sys.argv[1:]
    _peer.run_jobs(ckpts, lambda ckpt: load(verifier_dir, ckpt),
                   {"versions": _peer.versions("speculators", "transformers", "torch")})
