"""`verify`: the acceptance a drafter gets with its target, measured on CPU or GPU with our reference maths.

`measure(drafter, target, prompts, k)` is the Python API; `verify_inputs` checks what it is given before torch
loads, `verify.target` runs the target as speculative decoding with the drafter, `verify.reference` the drafter's
maths, `verify.rounds` the draft rounds. torch is imported with this package (transformers when a target is
loaded), so only the verify command imports it, inside its function, after verify_inputs has checked its inputs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import torch

from ..capture_ids import default_boundaries
from ..convert import read_source
from ..drafter import Drafter
from ..verify_inputs import (DEFAULT_PROMPTS, Inputs, check_inputs, check_k, check_pair, choose_boundaries,
                             prompts_digest, read_prompts)
from . import target as target_mod
from .rounds import Drafting, Rounds, accepted_per_start, drafts_per_start, walk_rounds
from .reference import DrafterMaths
from .rope_scan import RopeCandidate, rope_candidates, target_theta, with_theta

__all__ = ["DEFAULT_PROMPTS", "Inputs", "Measured", "VerifyResult", "acceptance", "check_inputs", "measure",
           "prepare", "prompts_digest", "read_prompts", "run", "scan_candidates", "scan_layers", "scan_rope",
           "with_drafter"]


@dataclass
class VerifyResult:
    """What `measure` found. mean_accepted_length counts the bonus token: it is tokens per target forward (1 when
    nothing is accepted, k+1 when everything is); per_position[j-1] is the share of rounds whose j-th draft was
    accepted, so mean_accepted_length == 1 + sum(per_position)."""

    k: int
    mean_accepted_length: float
    per_position: list[float]
    rounds: int
    tokens: int  # the target's generated tokens the rounds were measured on
    seconds: float
    tokens_per_second: float  # generated target tokens per second of the whole measurement (target and drafter)
    capture_boundaries: list[int]
    capture_from: str  # where the boundaries came from: "config", "engine default", or "given"
    prompts: int
    prompts_sha256: str
    target: str
    target_revision: str | None
    device: str
    max_new_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def acceptance_fields(self) -> dict[str, Any]:
        """What the registry keeps of it (registry.models.Acceptance, less the tool that measured it)."""
        return {"target_name_or_path": self.target, "target_revision": self.target_revision,
                "prompts_sha256": self.prompts_sha256, "prompts": self.prompts, "max_new_tokens": self.max_new_tokens,
                "k": self.k, "capture_boundaries": self.capture_boundaries,
                "mean_accepted_length": self.mean_accepted_length, "per_position": self.per_position,
                "rounds": self.rounds, "tokens_per_second": self.tokens_per_second, "device": self.device}


@dataclass
class Measured:
    """A drafter read once, its target loaded once and run once over the prompts, ready for any capture ids."""

    source: Any  # convert.Source: the drafter read, where from (path, uri, layout)
    target: Any  # target.LoadedTarget
    runs: list[Any]  # target.TargetRun per prompt
    prompts_sha256: str
    max_new_tokens: int
    embed: Callable[..., Any] = field(repr=False)  # token ids -> the embeddings the drafter reads
    maths: DrafterMaths = field(repr=False)
    decoded_with: tuple[int, list[int]] | None = None  # (k, boundaries) the runs' rounds drafted with, this drafter

    @property
    def drafter(self) -> Drafter:
        return self.source.drafter


def prepare(drafter: str | Path, target: str | Path, prompts: list[str] | None = None, *, k: int = 3,
            capture_boundaries: list[int] | None = None, device: str = "auto", max_new_tokens: int = 64,
            endpoint: str | None = None, token: str | None = None, revision: str | None = None,
            progress: Callable[[int], None] | None = None) -> Measured:
    """Read the drafter, load the target, decode the prompts speculatively with k drafts a round (every boundary's
    state kept, so that `acceptance` measures any other k or boundaries on the same text)."""
    return run(check_inputs(drafter, target, prompts, k=k, capture_boundaries=capture_boundaries, device=device,
                            endpoint=endpoint, token=token, revision=revision), max_new_tokens, progress)


def run(inputs: Inputs, max_new_tokens: int = 64, progress: Callable[[int], None] | None = None) -> Measured:
    """`prepare` with its inputs checked already (verify_inputs.check_inputs)."""
    loaded = target_mod.load_target_model(inputs)
    maths, embed = bind(inputs.source.drafter, loaded)
    runs = [target_mod.decode(loaded, Drafting(maths, inputs.boundaries, embed), prompt, inputs.k, max_new_tokens,
                              progress) for prompt in inputs.prompts]
    return Measured(inputs.source, loaded, runs, prompts_digest(inputs.prompts), max_new_tokens, embed, maths,
                    (inputs.k, inputs.boundaries))


def with_drafter(measured: Measured, drafter: str | Path, *, endpoint: str | None = None, token: str | None = None,
                 revision: str | None = None) -> Measured:
    """The same target run with another drafter (any layout, or a Hub repo id): no target forward again."""
    source = read_source(str(drafter), endpoint=endpoint, token=token, revision=revision)
    maths, embed = bind(source.drafter, measured.target)
    return replace(measured, source=source, maths=maths, embed=embed, decoded_with=None)


def bind(drafter: Drafter, loaded: Any) -> tuple[DrafterMaths, Callable[..., Any]]:
    """The drafter's maths on the target's device, and the embedding it drafts with; refused when the two do not
    fit together."""
    check_pair(drafter.config, loaded.hidden_size, loaded.vocab_size, loaded.num_layers)
    maths = DrafterMaths(drafter, loaded.device)
    table = maths.w.get("embed_tokens.weight")
    if table is None:  # the engines' default: the target's own embedding (rows cast as read: no float32 copy of it)
        table = loaded.model.get_input_embeddings().weight.detach()
    return maths, lambda ids: table[ids].to(torch.float32)


def boundaries_of(measured: Measured, given: list[int] | None = None) -> tuple[list[int], str]:
    return choose_boundaries(measured.drafter.config, measured.target.num_layers, given)


def acceptance(measured: Measured, k: int, boundaries: list[int] | None = None) -> VerifyResult:
    """The acceptance of the drafter at k drafts a round, capturing `boundaries` (None: its own)."""
    check_k(k)
    chosen, said = boundaries_of(measured, boundaries)
    start = time.perf_counter()
    rounds = Rounds(k)
    decoded = measured.decoded_with == (k, chosen)  # the rounds the decoding ran: nothing to draft again
    for done in measured.runs:
        accepted = done.accepted if decoded else accepted_per_start(
            done, *drafts_per_start(measured.maths, done, chosen, k, measured.embed))
        walk_rounds(accepted, done.prompt_length - 1, rounds)
    seconds = time.perf_counter() - start + sum(done.seconds for done in measured.runs)
    generated = sum(done.tokens.shape[0] - done.prompt_length for done in measured.runs)
    return VerifyResult(k, rounds.mean_accepted_length, rounds.per_position, len(rounds.accepted), generated, seconds,
                        generated / seconds if seconds else 0.0, sorted(chosen), said, len(measured.runs),
                        measured.prompts_sha256, measured.target.name_or_path, measured.target.revision,
                        str(measured.target.device), measured.max_new_tokens)


def measure(drafter: str | Path, target: str | Path, prompts: list[str] | None = None, k: int = 3, *,
            capture_boundaries: list[int] | None = None, device: str = "auto", max_new_tokens: int = 64,
            endpoint: str | None = None, token: str | None = None) -> VerifyResult:
    """The acceptance `drafter` (a directory in any layout we read, a GGUF, or a Hub repo id) gets with `target`
    (a model directory or Hub repo id) on `prompts` (None: DEFAULT_PROMPTS) at k drafts a round."""
    measured = prepare(drafter, target, prompts, k=k, capture_boundaries=capture_boundaries, device=device,
                       max_new_tokens=max_new_tokens, endpoint=endpoint, token=token)
    return acceptance(measured, k, capture_boundaries)


@dataclass
class Candidate:
    """One capture-id list scan_layers measured, and why it was a candidate."""

    boundaries: list[int]
    labels: list[str]  # "config", "recorded", "engine default", "id 2 -> 3", "all +1", ...
    result: VerifyResult


def scan_candidates(base: list[int], depth: int, recorded: list[int] | None = None) -> dict[tuple[int, ...], list[str]]:
    """The boundary lists worth measuring against `base` (the config's, or the engine default): the record's, each
    id one layer off, the whole list one layer off (a convention read wrongly), and the engine default."""
    out: dict[tuple[int, ...], list[str]] = {}

    def add(boundaries: list[int], label: str) -> None:
        key = tuple(sorted(boundaries))
        if len(set(key)) == len(base) and all(0 <= b <= depth for b in key):
            out.setdefault(key, []).append(label)

    add(base, "as measured")
    if recorded is not None:
        add(recorded, "recorded")
    for shift in (-1, 1):
        add([b + shift for b in base], f"all {shift:+d}")
    for i, b in enumerate(sorted(base)):
        for shift in (-1, 1):
            add([*sorted(base)[:i], b + shift, *sorted(base)[i + 1:]], f"id {b} -> {b + shift}")
    add(default_boundaries(depth), "engine default")
    return out


def scan_layers(measured: Measured, k: int, boundaries: list[int] | None = None,
                recorded: list[int] | None = None) -> list[Candidate]:
    """Acceptance under the drafter's capture boundaries and their neighbours, best first (ties: the order above)."""
    base, said = boundaries_of(measured, boundaries)
    candidates = scan_candidates(base, measured.target.num_layers, recorded)
    measured_ = [Candidate(list(key), [said if label == "as measured" else label for label in labels],
                           acceptance(measured, k, list(key))) for key, labels in candidates.items()]
    return sorted(measured_, key=lambda c: -c.result.mean_accepted_length)


def scan_rope(measured: Measured, k: int, boundaries: list[int] | None = None) -> list[RopeCandidate]:
    """Acceptance at each RoPE base the drafter may have been trained at (verify.rope_scan), best first (ties: the
    order rope_candidates gives: the config's reading first)."""
    candidates = rope_candidates(measured.drafter.config.rope, target_theta(measured.target.model.config))
    out = [RopeCandidate(theta, labels, acceptance(replace(measured, maths=with_theta(measured.maths, theta),
                                                           decoded_with=None), k, boundaries))
           for theta, labels in candidates.items()]
    return sorted(out, key=lambda c: -c.result.mean_accepted_length)
