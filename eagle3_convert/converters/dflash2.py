"""DFlash2's own fields, checked where converters/dflash.py reads either layout (docs/formats.md §2.8, "DFlash2").

DFlash2 (vllm-project/speculators PR 1006, `models/dflash2`, read in speculators 0.9.0) is DFlash plus a grouped
dynamic causal convolution around each layer's attention and MLP and a low-rank candidate selector that reranks the
top-k of the verifier's head. Its four sizes sit at the top level of a speculators config (`DFlash2SpeculatorConfig`,
config.py: conv_kernel_size 2, conv_group_size 16, selector_rank 256, selector_top_k 16, each `ge=1`) and in
`dflash_config` of a flat one, where the engines read them: vLLM 0.33.0 `update_dflash2` copies the speculators
fields there (transformers_utils/configs/speculators/algos.py) and `DFlash2Qwen3DecoderLayer` /
`DFlash2Qwen3Model` index them (`draft_config["conv_kernel_size"]`: KeyError without it, qwen3_dflash2.py);
SGLang 0.5.23 `parse_dflash_draft_config` reads them from `dflash_config` with 0 for absent (dflash_utils.py), and
`DFlash2DraftModel` refuses a missing selector_rank (srt/models/dflash.py). speculators' defaults stand in for none
of them in an engine, so each is required here.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import FormatError
from ..json_values import is_int

FIELDS = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")


def check(algorithm: Mapping[str, Any], hidden_size: int, vocab_size: int, draft_vocab_size: int,
          where: str) -> None:
    """DFlash2's sizes as every reader builds them, or a one-line refusal naming the field."""
    for key in FIELDS:
        value = algorithm.get(key)
        if not (is_int(value) and value >= 1):
            raise FormatError(f"{where}{key} is {value!r}: DFlash2 sizes its convolutions and candidate selector by "
                              "it (vLLM's qwen3_dflash2.py indexes it: KeyError; SGLang reads 0 and builds none)",
                              f"write {key} (an integer >= 1, as the drafter was trained) into config.json",
                              code="E-CONFIG-FIELD")
    block = algorithm.get("block_size")
    if not (is_int(block) and block >= 1):
        raise FormatError(f"{where}block_size is {block!r}: DFlash2's convolutions count positions within a block "
                          "of block_size (speculators' GroupedDynamicCausalConv; SGLang reads it, default 16)",
                          "write the trained block_size into config.json", code="E-CONFIG-FIELD")
    group, kernel, top_k = algorithm["conv_group_size"], algorithm["conv_kernel_size"], algorithm["selector_top_k"]
    if hidden_size % group:
        raise FormatError(f"{where}conv_group_size {group} does not divide hidden_size {hidden_size}: each dynamic "
                          "kernel is shared by conv_group_size channels (speculators and vLLM raise ValueError)",
                          "write the trained conv_group_size into config.json", code="E-CONFIG-FIELD")
    if kernel > block:
        raise FormatError(f"{where}conv_kernel_size {kernel} exceeds block_size {block}: the convolution's taps "
                          "stay within one draft block (speculators' GroupedDynamicCausalConv raises)",
                          "write the trained conv_kernel_size and block_size into config.json", code="E-CONFIG-FIELD")
    if top_k > vocab_size:
        raise FormatError(f"{where}selector_top_k {top_k} exceeds the vocabulary's {vocab_size} tokens (speculators' "
                          "CandidateSelector raises)", "write the trained selector_top_k into config.json",
                          code="E-CONFIG-FIELD")
    if draft_vocab_size != vocab_size:
        raise FormatError(f"a DFlash2 drafter drafting {draft_vocab_size} of {vocab_size} tokens: its candidate "
                          "selector's codebooks and the verifier's head it reranks span the full vocabulary "
                          "(speculators' DFlash2DraftModel raises \"DFlash2 currently requires the full verifier "
                          "vocabulary\"; vLLM and SGLang size the codebooks by vocab_size)",
                          "use a DFlash2 drafter trained on the full vocabulary (draft_vocab_size = vocab_size, no "
                          "d2t/t2d), or a DFlash one for a reduced vocabulary", code="E-VOCAB-FULL-ONLY")
