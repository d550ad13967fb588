"""Which input embedding each engine drafts with: the drafter's stored `embed_tokens`, or the target's.

A drafter trained on the target's embedding (SpecForge, TorchSpec and speculators load it from the target and
freeze it) whose file holds another one (TorchSpec #38: `convert_to_hf.py` saved a randomly initialised table)
drafts as trained only in the engines that take the target's; one trained with its own drafts as trained only in
those that take the stored one. The file cannot say which; validate compares it with the target's (`--target` with
weights) and names both groups.

Read in the engines' sources (the venvs of this project's engine tiers):
- vLLM 0.24.0 and 0.33.0, V1 runner (`v1/spec_decode/llm_base_proposer.py` `_maybe_share_embeddings`, 0.24.0
  :1325-1390, 0.33.0 :1418-1505): a checkpoint that loads `embed_tokens` sets `has_own_embed_tokens`
  (`model_executor/models/utils.py` `process_eagle_weight`); the target's is shared when the drafter has none or
  when `torch.equal(target, drafter)`, else the drafter's is kept. Only with pipeline parallel size 1 (else the
  drafter's own is loaded). 0.33.0 also keeps the drafter's when the widths differ. The V2 runner
  (`v1/worker/gpu/spec_decode/eagle/utils.py` `_should_share`, 0.24.0 :12-25 and :45-61, 0.33.0 :18-34 and
  `maybe_share_target_embed` :45-76) decides alike.
  The comparison is made by each tensor-parallel rank on its own vocabulary shard, with no agreement between ranks:
  a table that differs in some rows only is kept on the ranks holding those rows and replaced on the others
  (vllm #50158, reported on 0.26.0 with TP=2: acceptance collapsed).
- SGLang 0.5.11 and 0.5.23 (`speculative/eagle_worker.py` :175-186 in 0.5.11, `eagle_worker_v2.py` :360-363 in
  0.5.23; `models/llama.py` `set_embed`, :777-785 / :910-918): EAGLE-3 always gets the target's embedding, unless
  `target_hidden_size` differs from `hidden_size` (TorchSpec #38: "SGLang is unaffected").
- TensorRT-LLM (`_torch/models/modeling_speculative.py` `Eagle3DraftModel`, 2026 version): `embed_tokens` is built only
  when `target_hidden_size` != `hidden_size`; otherwise the target's is shared and a stored copy ignored.
- llama.cpp (`token_embd.weight` optional, `ctx_other` fallback), LMDeploy (engines/lmdeploy.py), mlx-vlm
  (engines/mlxvlm.py) and the speculators library 0.9.0 (docs/formats.md §6.4): the stored table when there is one.
  Without one llama.cpp and LMDeploy take the target's; mlx-vlm fails at its first draft step and speculators 0.9.0
  leaves the table uninitialised.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..names import LABELS

OWN, TARGET, OWN_UNLESS_EQUAL = "own", "target", "own unless equal"


@dataclass(frozen=True)
class EmbedReading:
    stored: str  # what the runner drafts with when the file stores a table: OWN, TARGET or OWN_UNLESS_EQUAL
    absent: str | None  # ... when it stores none: TARGET, or why it cannot (None: the target's)
    releases: str  # the releases read (as findings name them)


READINGS: dict[str, EmbedReading] = {
    "vllm-v1": EmbedReading(OWN_UNLESS_EQUAL, None, "0.24.0-0.33.0"),
    "vllm-v2": EmbedReading(OWN_UNLESS_EQUAL, None, "0.24.0-0.33.0"),
    "sglang": EmbedReading(TARGET, None, "0.5.11-0.5.23"),
    "trtllm": EmbedReading(TARGET, None, "(2026 sources)"),
    "llamacpp": EmbedReading(OWN, None, "b11434"),
    "lmdeploy": EmbedReading(OWN, None, "(from source)"),
    "mlx-vlm": EmbedReading(OWN, "fails at its first draft step (its own embed_tokens is not loaded)", "0.6.15"),
    "speculators": EmbedReading(OWN, "leaves the embedding uninitialised (values near 1e38)", "0.9.0"),
}


def drafts_with_stored(runner: str, equal: bool) -> bool:
    """Whether `runner` drafts with a stored table that is (`equal`) or is not byte-equal to the target's."""
    return READINGS[runner].stored == OWN or (READINGS[runner].stored == OWN_UNLESS_EQUAL and not equal)


def label(runner: str) -> str:
    return f"{LABELS[runner]} {READINGS[runner].releases}"


def cannot_do_without(runners: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """The runners that do not take the target's embedding when a drafter stores none, and what they do."""
    return [(r, READINGS[r].absent) for r in runners if r in READINGS and READINGS[r].absent]
