"""Capture-layer ids: one list, several meanings (docs/formats.md §4).

The canonical form is the CAPTURE BOUNDARY b in [0, L]: index into Hugging Face
`output_hidden_states` (0 = embedding output, b = output of block b-1 = input of block b,
L = last block's output before the final norm). Each engine reads the ids in its own
convention; `engine_boundaries` replays an engine's reading, and `ids_for_engine` finds
the ids that make that engine capture the wanted boundaries (or says it cannot).
"""

from __future__ import annotations

from typing import Any, Sequence

from .errors import RefusalError, UsageError
from .names import BLOCK_OUTPUT_CONVENTIONS, BOUNDARY, BOUNDARY_CONVENTIONS, CAPTURE_CONVENTIONS, CONVENTIONS

IDS_KEY = "eagle_aux_hidden_state_layer_ids"  # the config key every layout writes its capture ids under

# Target model_types whose SGLang capture path has its own quirks.
DEEPSEEK_FAMILY = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "glm4_moe_lite"})
GPT_OSS_FAMILY = frozenset({"gpt_oss"})


def default_boundaries(num_layers: int) -> list[int]:
    """Where every engine captures when the config names no ids: {2, L//2, L-3}."""
    return [2, num_layers // 2, num_layers - 3]


def depth_defaults(depth: int | None) -> list[int] | None:
    """default_boundaries on a target of known depth; None where the depth is unknown."""
    return default_boundaries(depth) if depth else None


def as_captured(boundaries: Sequence[int] | None, depth: int | None) -> list[int] | None:
    """The boundaries a list names; where it names none, the engines' default on a target of `depth`."""
    return list(boundaries) if boundaries is not None else depth_defaults(depth)


def block_diffusion_boundaries(target_layer_ids: list[int]) -> list[int]:
    """DFlash/DSpark `target_layer_ids` as boundaries: every reader takes hidden_states[id + 1], so -1 is the
    embedding output (z-lab and SpecForge's trainers, vLLM's update_dflash, SGLang; docs/formats.md §2.8)."""
    return [i + 1 for i in target_layer_ids]


def block_diffusion_ids(boundaries: list[int]) -> list[int]:
    """The `target_layer_ids` that capture `boundaries` (block_diffusion_boundaries' inverse)."""
    return [b - 1 for b in boundaries]


def a_layer_target(depth: int | None) -> str:
    """'a 4-layer target', 'an 8-layer target' ('any target' for an unknown depth): the article as the number is
    said, which its leading group of thousands decides (eight, eleven, eighteen, eighty-..., eight hundred ...)."""
    if depth is None:
        return "any target"
    digits = str(depth)
    said_first = digits[:(len(digits) - 1) % 3 + 1]
    an = said_first.startswith("8") or said_first in ("11", "18")
    return f"{'an' if an else 'a'} {depth}-layer target"


def target_family(model_type: str | None) -> str:
    if model_type in DEEPSEEK_FAMILY:
        return "deepseek"
    if model_type in GPT_OSS_FAMILY:
        return "gpt_oss"
    return "default"


def capture_context(drafter_family: str, *targets: Any) -> tuple[str, int | None]:
    """The target family (SGLang's id quirks depend on it) and depth (bounds what can be captured) of the first
    known target (a TargetIdentity); an MLA drafter with no known target serves a DeepSeek/Kimi one."""
    target = next((t for t in targets if t is not None), None)
    model_type = target.model_type if target else None
    if model_type is None and drafter_family == "deepseek_mla":
        model_type = "deepseek_v3"
    return target_family(model_type), target.num_hidden_layers if target else None


def engine_boundaries(engine: str, ids: Sequence[int], family: str = "default",
                      num_layers: int | None = None) -> list[int] | None:
    """The boundaries `engine` captures for `ids` as written; None if it captures nothing sane."""
    ids = list(ids)
    if engine in BOUNDARY_CONVENTIONS:
        out = ids
    elif engine == "sglang" and family == "deepseek":
        if any(x < 0 for x in ids):
            return None  # -1 captures nothing on this family
        out = [x + 1 for x in ids] if ids and ids[0] == 1 else ids
    elif engine == "sglang" and family == "gpt_oss":
        out = ids if num_layers is not None and ids and max(ids) == num_layers else [x + 1 for x in ids]
    elif engine in BLOCK_OUTPUT_CONVENTIONS:
        out = [x + 1 for x in ids]
    else:
        raise ValueError(f"unknown engine {engine!r}")
    if any(b < 0 for b in out):
        return None
    return out


def capturable(engine: str, boundary: int, family: str, num_layers: int | None) -> bool:
    """Whether `engine` can capture at `boundary` at all (SGLang never sees the last block's output)."""
    if num_layers is None:
        return boundary >= 0
    if engine == "sglang" and family != "gpt_oss":
        return 0 <= boundary <= num_layers - 1
    return 0 <= boundary <= num_layers


def ids_for_engine(engine: str, boundaries: Sequence[int], family: str = "default",
                   num_layers: int | None = None) -> list[int]:
    """Ids to write so that `engine` captures exactly `boundaries`; RefusalError if none exist."""
    boundaries = list(boundaries)
    for b in boundaries:
        if not capturable(engine, b, family, num_layers):
            raise RefusalError(
                f"{engine} cannot capture boundary {b} (the output of block {b - 1}) on "
                f"{a_layer_target(num_layers)}: the capture would silently go missing",
                "retrain the drafter on capturable layers, or serve it with vLLM (speculators/vllm layouts)",
                code="E-CAPTURE-UNREACHABLE")
    shifted = [b - 1 for b in boundaries]
    # The engine's own convention first, quirky families may need the other spelling. Where both work, the first
    # is also the one older releases read alike: SGLang before PRs 25454 / 32334 reads the DeepSeek and gpt-oss
    # families' ids as any other family's (engines/sglang.py ID_QUIRKS).
    candidates = (boundaries, shifted) if engine in BOUNDARY_CONVENTIONS else (shifted, boundaries)
    works = [ids for ids in candidates if engine_boundaries(engine, ids, family, num_layers) == boundaries]
    if works:
        return works[0]
    raise RefusalError(
        f"no id list makes {engine} ({family} target family) capture boundaries {boundaries}",
        "this engine's id convention cannot express these capture layers; serve with vLLM instead",
        code="E-CAPTURE-UNEXPRESSIBLE")


def convention_table(boundaries: Sequence[int] | None, num_layers: int | None,
                     family: str = "default") -> dict[str, list[int] | str]:
    """The same capture layers written in every engine's convention (for inspect and model cards)."""
    table: dict[str, list[int] | str] = {}
    if boundaries is None:
        if num_layers is None:
            return {engine: "engine default" for engine in CONVENTIONS}
        boundaries = default_boundaries(num_layers)
    for engine in CONVENTIONS:
        try:
            table[engine] = ids_for_engine(engine, boundaries, family, num_layers)
        except RefusalError as exc:
            table[engine] = f"cannot express ({exc.code})"
    return table


def training_boundaries(ids: Sequence[int], convention: str, *, family: str = "default",
                        num_layers: int | None = None, num_aux: int | None = None) -> list[int]:
    """The boundaries the training captured, from ids given in `convention` (docs/formats.md §4)."""
    if convention not in CAPTURE_CONVENTIONS:
        raise UsageError(f"unknown capture-id convention {convention!r}",
                         f"choose one of: {', '.join(CAPTURE_CONVENTIONS)}")
    boundaries = list(ids) if convention == BOUNDARY else engine_boundaries(convention, ids, family, num_layers)
    if boundaries is None or any(b < 0 for b in boundaries):
        raise UsageError(f"{convention} ids {list(ids)} capture no hidden state (target family: {family})",
                         "give the ids exactly as the training config spelled them, with its --convention")
    if num_layers is not None and max(boundaries, default=0) > num_layers:
        raise UsageError(f"{convention} ids {list(ids)} mean boundaries {boundaries}, beyond the target's "
                         f"{num_layers} layers", "check --capture-layers, --convention and --target")
    if num_aux is not None and len(boundaries) != num_aux:
        raise UsageError(f"{len(boundaries)} capture layers given, but the drafter's fc fuses {num_aux} hidden states",
                         "give one id per captured layer, as the training config listed them")
    return boundaries
