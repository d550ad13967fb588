"""Who a target is: its facts, whatever it is called. The one place that decides whether two targets are one.

A drafter is trained on one target model. That model has many names: a Hub repo id, a directory (named by a
relative path, an absolute path or a symlink to it), a snapshot in the Hugging Face cache. A `TargetIdentity`
holds one name the target is served by (`name_or_path`), the other names it is known to have (`aliases`), and
its facts: architectures, model_type, depth, width, vocabulary, and the digest of its config.json where it was
read (`config_sha256`, taken over the config without the keys a save rewrites: `CONFIG_NOISE`).

`compare` is the rule every command applies (docs/formats.md §10):
- facts that both sides know and that differ: two targets (an error wherever a record is contradicted);
- else a shared name, or the same config digest: one target;
- else (names differ, nothing can tell): untold, a warning that says what to pass to settle it.
Names are learned as aliases only when the targets are one: by a shared name or digest, or because the user
named both in one command (`--verifier ORG/NAME --target DIR`; `registry add --verifier NAME` for the
recorded target). A name a config states and the --target passed beside it are not joined: the config is what
is being checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

# What a `save_pretrained` or a download rewrites without changing the model: left out of the config digest.
CONFIG_NOISE = frozenset({"_name_or_path", "transformers_version", "_commit_hash", "torch_dtype", "dtype",
                          "use_cache", "_attn_implementation", "attn_implementation", "_attn_implementation_autoset"})
# The facts compared, with how a message names each (architectures compared as sets).
FACTS = (("architectures", "architectures"), ("model_type", "model_type"), ("num_hidden_layers", "depth"),
         ("hidden_size", "hidden size"), ("vocab_size", "vocabulary"))
# A Hugging Face cache snapshot: .../models--ORG--NAME/snapshots/REVISION[/...]
_SNAPSHOT = re.compile(r"(?:^|/)models--([^/]+?)--([^/]+)/snapshots/([^/]+)(?:/|$)")


class TargetIdentity(BaseModel):
    """The target (verifier) model the drafter proposes tokens for."""

    model_config = ConfigDict(extra="forbid")

    name_or_path: str | None = None
    architectures: list[str] = Field(default_factory=list)
    revision: str | None = None
    model_type: str | None = None
    num_hidden_layers: int | None = None
    hidden_size: int | None = None
    vocab_size: int | None = None
    aliases: list[str] = Field(default_factory=list)  # other names of this same target
    config_sha256: str | None = None  # config_digest of its config.json, where one was read under one of its names
    # The context it serves (max_position_embeddings), read from its config for validate's W-CONFIG-CONTEXT: a
    # fact of that config, not of who the target is, so never read from a file nor written out (private).
    _context_length: int | None = PrivateAttr(default=None)
    # Whether its config declares M-RoPE (engines/vllm.py mrope_section: a vLLM V1 caveat), the same kind of fact.
    _mrope: bool = PrivateAttr(default=False)

    @property
    def context_length(self) -> int | None:
        return self._context_length

    @property
    def uses_mrope(self) -> bool:
        return self._mrope

    def serving(self, context_length: int | None, mrope: bool = False) -> "TargetIdentity":
        """This target, knowing the context it serves and whether it uses M-RoPE (read from its config.json)."""
        self._context_length = context_length
        self._mrope = mrope
        return self

    @property
    def names(self) -> list[str]:
        """Every name this target is known by, its serving name first."""
        return list(dict.fromkeys(n for n in [self.name_or_path, *self.aliases] if n))

    def known_as(self, name: str) -> bool:
        return any(_same_name(name, mine) for mine in self.names)

    def shares_identity(self, other: "TargetIdentity") -> bool:
        """A name in common, or the same config digest: what makes two targets one when no fact differs."""
        return any(other.known_as(name) for name in self.names) or bool(
            self.config_sha256 and self.config_sha256 == other.config_sha256)

    @staticmethod
    def merged(identity: "TargetIdentity | None", more: "TargetIdentity | None") -> "TargetIdentity | None":
        """`identity` (who the target is) with the facts it leaves empty filled from `more`; `more`'s names become
        aliases only when `compare` finds them one target (a fact copied is not a name learned)."""
        if more is None or identity is None:
            return identity or more
        merged = identity.model_dump()
        for key, value in more.model_dump(exclude={"aliases", "name_or_path", "config_sha256"}).items():
            if merged.get(key) in (None, []) and value not in (None, []):
                merged[key] = value
        if compare(identity, more).same:
            merged["config_sha256"] = identity.config_sha256 or more.config_sha256
            merged["name_or_path"] = identity.name_or_path or more.name_or_path
            merged["aliases"] = [n for n in dict.fromkeys([*identity.aliases, *more.names])
                                 if not _same_name(n, merged["name_or_path"] or "")]
        return TargetIdentity.model_validate(merged)

    def joined(self, given: "TargetIdentity | None") -> "TargetIdentity":
        """This target (--verifier: the name the user says it is served by) and `given` (--target: its config) as
        the one target the user says they are: this one's name, both names, `given`'s facts and digest. Callers
        first check that `compare` does not find them two models."""
        if given is None:
            return self
        both = given.model_copy(update={"name_or_path": self.name_or_path or given.name_or_path})
        return TargetIdentity.merged(both.named_also(*given.names, *self.aliases), self) or both

    def named_also(self, *names: str | None) -> "TargetIdentity":
        """This target with `names` learned as aliases (the user named them together)."""
        learned = [n for n in dict.fromkeys(names) if n and not self.known_as(n)]
        return self.model_copy(update={"aliases": [*self.aliases, *learned]}) if learned else self


def _same_name(a: str, b: str) -> bool:
    """Paths are compared as written (absolute, resolved where they were read); Hub repo ids ignoring case."""
    return a == b if a.startswith("/") or b.startswith("/") else a.lower() == b.lower()


def config_digest(config: dict[str, Any]) -> str:
    """The digest of a target's config.json, without the keys a save or a download rewrites (CONFIG_NOISE)."""
    kept = {k: v for k, v in config.items() if k not in CONFIG_NOISE}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def local_names(path: str) -> tuple[list[str], str | None]:
    """The names a local copy of a target is known by: its resolved absolute path (relative paths and symlinks
    are never recorded as such) and, for a Hugging Face cache snapshot, its repo id; and that snapshot's revision."""
    real = os.path.realpath(path)
    names = [real]
    revision = None
    for candidate in (os.path.abspath(path), real):
        found = _SNAPSHOT.search(candidate)
        if found:
            names.append(f"{found.group(1)}/{found.group(2)}")
            revision = found.group(3)
            break
    return list(dict.fromkeys(names)), revision


@dataclass(frozen=True)
class Sameness:
    """How two targets compare: one target, two, or untold (names differ, nothing can tell)."""

    verdict: Literal["same", "differ", "untold"]
    differences: tuple[tuple[str, Any, Any], ...] = ()  # (fact, one side's value, the other's) where they differ

    @property
    def same(self) -> bool:
        return self.verdict == "same"

    def said(self) -> str:
        return ", ".join(f"{what} {a} vs {b}" for what, a, b in self.differences)


def compare(a: TargetIdentity | None, b: TargetIdentity | None) -> Sameness:
    """Whether `a` and `b` are one target (see the module's doc). A side that is unknown (None) contradicts
    nothing: same."""
    if a is None or b is None:
        return Sameness("same")
    differences = []
    for key, what in FACTS:
        mine, theirs = getattr(a, key), getattr(b, key)
        if key == "architectures":
            mine, theirs = sorted(set(mine)), sorted(set(theirs))
        if mine not in (None, []) and theirs not in (None, []) and mine != theirs:
            differences.append((what, mine, theirs))
    if differences:
        return Sameness("differ", tuple(differences))
    if not a.names or not b.names or a.shares_identity(b):
        return Sameness("same")
    return Sameness("untold")

