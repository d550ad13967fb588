"""vLLM 0.33.0's and SGLang 0.5.23's own DFlash2 config readers on our files (CPU, no model built).

    python probe_dflash2_config.py SPECULATORS_DIR FLAT_DIR

Reports what each engine's code makes of the config: vLLM's speculators path (`SpeculatorsConfig` method mapping,
`update_dflash2` in transformers_utils/configs/speculators/algos.py) on the speculators file, and SGLang's
`parse_dflash_draft_config` (speculative/dflash_utils.py) on the flat one. DFlash2's forward needs vLLM's V2 GPU
runner and SGLang's CUDA worker, so no model is built here. Every assertion lives in tests/test_engines_dflash2.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import _engine  # noqa: E402,F401  (offline env, CPU stand-ins)


def main(speculators_dir: str, flat_dir: str) -> None:
    with contextlib.redirect_stdout(sys.stderr):
        from transformers import PretrainedConfig
        from vllm.transformers_utils.configs.speculators.algos import update_dflash2
        from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig
        from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config

        spec = json.loads((Path(speculators_dir) / "config.json").read_text())
        built = dict(spec["transformer_layer_config"])
        update_dflash2(spec, built)
        method = SpeculatorsConfig.extract_vllm_speculative_config(spec)
        flat = json.loads((Path(flat_dir) / "config.json").read_text())
        parsed = parse_dflash_draft_config(draft_hf_config=PretrainedConfig(**flat))
    report = {
        "vllm": {"architectures": built["architectures"], "dflash_config": built["dflash_config"],
                 "aux_layer_ids": built["eagle_aux_hidden_state_layer_ids"], "speculative_config": method},
        "sglang": {key: getattr(parsed, key) for key in ("block_size", "conv_kernel_size", "conv_group_size",
                                                         "selector_rank", "selector_top_k", "target_layer_ids",
                                                         "mask_token_id")},
    }
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
