"""The draft rounds a serving engine runs on the target's greedy text, and their acceptance.

Greedy verification accepts the drafted tokens up to the first that differs from the target's own next token,
then adds the target's token (the bonus). `Drafting` is the drafter's side of that decoding (verify.target.decode),
one round at a time. Once the text and its states are known, any other drafter or capture boundaries are measured
on them without the target: every round's inputs are what the engine would hold, so each starting position's
drafts are computed at once (reference.Chain), and the rounds are walked from the end of the prompt: a round at
position p that accepts a drafts starts the next at p + a + 1, as decoding does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .reference import Chain, DrafterMaths
from .target import TargetRun, last_start


@dataclass
class Rounds:
    """Draft rounds and how many drafts each accepted, summed over prompts."""

    k: int
    accepted: list[int] = field(default_factory=list)  # per round: accepted drafts, 0..k (the bonus not counted)

    @property
    def mean_accepted_length(self) -> float:
        """Tokens per target forward: 1 (the bonus) + the accepted drafts, averaged over rounds; 1..k+1."""
        return 1.0 + sum(self.accepted) / len(self.accepted) if self.accepted else 0.0

    @property
    def per_position(self) -> list[float]:
        """Position j (1..k): the share of rounds whose j-th draft was accepted (and so were all before it). Their
        sum plus 1 is mean_accepted_length (vLLM's per-position acceptance)."""
        n = len(self.accepted)
        return [sum(a >= j for a in self.accepted) / n if n else 0.0 for j in range(1, self.k + 1)]


class Drafting:
    """The drafter's side of speculative decoding on one text (target.Drafts): each round extends its cache over
    the positions verified since the last, then drafts k tokens as a top-1 chain from the newest."""

    def __init__(self, maths: DrafterMaths, boundaries: list[int], embed):
        self.maths, self.boundaries, self.embed = maths, sorted(boundaries), embed
        self.chain = Chain(maths)

    @torch.no_grad()
    def __call__(self, tokens: torch.Tensor, states: list[torch.Tensor], p: int, k: int) -> torch.Tensor:
        maths, done = self.maths, self.chain.verified
        fused = maths.fuse([states[b][done: p + 1] for b in self.boundaries])
        token, state = maths.head(self.chain.extend(self.embed(tokens[done + 1: p + 2]), fused)[-1:])
        out, start = [token], torch.tensor([p], device=maths.device)
        for depth in range(2, k + 1):
            token, state = maths.head(self.chain.step(start, token, state, depth, self.embed))
            out.append(token)
        return torch.cat(out)


@torch.no_grad()
def drafts_per_start(maths: DrafterMaths, run: TargetRun, boundaries: list[int], k: int,
                     embed) -> tuple[torch.Tensor, torch.Tensor]:
    """(starts [S], drafts [S, k]): from every position p whose k following tokens are known (p from the prompt's
    last token on), the k tokens the drafter proposes after the verified token p+1."""
    tokens = run.tokens.to(maths.device)
    states = [run.states[b].to(maths.device) for b in sorted(boundaries)]
    chain = Chain(maths)
    drafted, handed = maths.head(chain.extend(embed(tokens[1:]), maths.fuse(states)))
    starts = torch.arange(run.prompt_length - 1, last_start(tokens.shape[0], k) + 1, device=maths.device)
    if starts.numel() == 0:
        return starts, torch.empty((0, k), dtype=torch.long, device=maths.device)
    out = [drafted[starts]]
    state = handed[starts]
    for depth in range(2, k + 1):
        token, state = maths.head(chain.step(starts, out[-1], state, depth, embed))
        out.append(token)
    return starts, torch.stack(out, 1)


def accepted_per_start(run: TargetRun, starts: torch.Tensor, drafts: torch.Tensor) -> dict[int, int]:
    """Each start's accepted drafts: the leading drafts equal to the target's tokens p+2 .. p+k+1."""
    k = drafts.shape[1]
    truth = torch.stack([run.tokens.to(drafts.device)[starts + 1 + j] for j in range(1, k + 1)], 1)
    accepted = (drafts == truth).long().cumprod(1).sum(1)
    return dict(zip(starts.tolist(), accepted.tolist()))


def walk_rounds(accepted: dict[int, int], first: int, rounds: Rounds) -> None:
    """The rounds decoding runs: from `first`, each round moves past its accepted drafts and the bonus."""
    p = first
    while p in accepted:
        rounds.accepted.append(accepted[p])
        p += accepted[p] + 1
