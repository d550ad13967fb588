"""`Context`: one checkpoint read in one layout, replayed for the chosen engines.

Every check is a function `check_x(ctx)` that reads the context and appends findings to
`ctx.out`; `read_config` and `read_capture_ids` also fill in what later checks read
(`cfg`, `intents`, `ids`, `intended`). The helpers here are the ones every check shares.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..converters.base import target_betrayed_by
from ..converters.layout import Layout
from ..capture_ids import IDS_KEY, engine_boundaries, target_family
from ..drafter import DrafterConfig
from ..target_identity import TargetIdentity
from ..names import BOUNDARY_CONVENTIONS
from ..safetensors_io import TensorSource
from ..sources import has_repo_id_shape
from .findings import Finding, finding
from .raw import RawCheckpoint

MAX_CAPTURE_IDS = 64  # a drafter fuses a handful of captured states; a longer list is not a capture list
LOCATIONS = {"top": f"$.{IDS_KEY}", "nested": f"$.eagle_config.{IDS_KEY}"}


class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()


def sidecar_target(side: dict[str, Any] | None) -> TargetIdentity | None:
    """What this tool recorded beside config.json about the target (trusted only with that exact config)."""
    target = (side or {}).get("target")
    if not isinstance(target, dict):
        return None
    try:
        return TargetIdentity.model_validate(target)
    except ValueError:
        return None


class Context:
    """The checks of one checkpoint read in one layout, replayed for the chosen engines."""

    def __init__(self, raw: RawCheckpoint, layout: Layout, engines: Sequence[str], target: TargetIdentity | None,
                 source_label: str, findings: list[Finding], name_layout: bool = False,
                 recorded_target: TargetIdentity | None = None):
        self.raw, self.layout, self.engines, self.out = raw, layout, list(engines), findings
        self.name_layout = name_layout  # detection could not choose, or --from chose: commands say --from
        self.config: dict[str, Any] = layout.config_view(raw.config or {})
        self.src = source_label
        self.given_target = target  # --target
        # without --target, the target the sidecar or the registry recorded for these weights: `validate DIR`
        # and `validate DIR --target T` judge capture layers at the same depth
        self.target = target or sidecar_target(raw.sidecar) or recorded_target
        self.speculators_format = "speculators_model_type" in self.config or layout.name == "speculators"
        eagle = self.config.get("eagle_config")
        self.eagle: dict[str, Any] = eagle if isinstance(eagle, dict) else {}
        self.cfg: DrafterConfig | None = None
        # the layout's own name table (a third-party layout without one stores canonical names)
        self.layout_rules = layout.renames
        self.intents: dict[str, str | None] = {}  # stored name -> canonical name the layout means by it
        self.ids: dict[str, list[int] | None] = {}  # "top"/"nested" -> capture ids as written
        self.intended: list[int] | None = None  # the boundaries the config means (None: unknown or default)
        self.releases: dict[str, list[str | None]] = {}  # engine -> the releases to judge (None: its newest)

    # --- plumbing
    def add(self, code: str, message: str, hint: str | None = None, where: str | None = None,
            engine: str | None = None) -> None:
        self.out.append(finding(code, message, hint, where, engine))

    def extend(self, findings: list[Finding]) -> None:
        self.out.extend(findings)

    @property
    def src_args(self) -> str:
        """SRC as a command takes it, quoted for the shell: a Hub copy read at a commit (labelled `org/name@commit`)
        is `org/name --revision commit`."""
        repo, at, commit = self.src.partition("@")
        if at and has_repo_id_shape(repo) and not Path(self.src).exists():
            return f"{shlex.quote(repo)} --revision {shlex.quote(commit)}"
        return shlex.quote(self.src)

    def command(self, to: str, *flags: str) -> str:
        """The exact conversion that fixes a finding: the source read as validate read it (this layout, named
        when detection could not choose or --from chose it; the --target given, which sets depth and family); every
        path quoted for the shell, as a user pastes it."""
        hub = self.src_args != shlex.quote(self.src)  # a Hub copy at a commit: named after its repo
        dest = shlex.quote(f"{Path(self.src.partition('@')[0] if hub else self.src).name or 'drafter'}-{to}")
        read = ("--from", self.layout.name) if self.name_layout and "--from" not in flags else ()
        named = self.given_target.name_or_path if self.given_target else None
        if named:
            read += ("--target", shlex.quote(named))
        return " ".join(["eagle3-convert", *read, *flags, "--to", to, self.src_args, dest])

    def command_inspect(self) -> str:
        return " ".join(["eagle3-convert", "inspect", *(("--from", self.layout.name) if self.name_layout else ()),
                         self.src_args])

    @property
    def depth(self) -> int | None:
        return self.target.num_hidden_layers if self.target else None

    @property
    def mrope(self) -> bool:
        return bool(self.target and self.target.uses_mrope)

    @property
    def family(self) -> str:
        model_type = self.target.model_type if self.target else None
        if model_type is None and self.cfg is not None and self.cfg.family == "deepseek_mla":
            model_type = "deepseek_v3"  # an MLA drafter serves a DeepSeek / Kimi target
        if model_type is None and self.cfg is not None:  # what the config betrays, as the readers infer it
            betrayed = target_betrayed_by(self.config, self.cfg.family)
            model_type = betrayed[0].model_type if betrayed else None
        return target_family(model_type)


    @property
    def home(self) -> str:
        """Where this layout keeps its ids (and so in which convention they are written)."""
        return "top" if self.layout.engine in BOUNDARY_CONVENTIONS else "nested"

    def meaning(self, convention: str, ids: list[int]) -> list[int] | None:
        try:
            return engine_boundaries(convention, ids, self.family, self.depth)
        except ValueError:  # a third-party layout with a convention of its own
            return None


    def codes(self) -> set[str]:
        return {f.code for f in self.out}


    def tensor(self, canonical: str) -> TensorSource | None:
        """The tensor this layout means by `canonical` (None: the file holds none)."""
        for stored, intent in self.intents.items():
            if intent == canonical:
                return self.raw.tensors[stored]
        return None

    def layers_plausible(self) -> bool:
        """Every layer needs several tensors; a config claiming more layers than tensors is not enumerated."""
        return self.cfg.num_layers <= len(self.raw.tensors)
