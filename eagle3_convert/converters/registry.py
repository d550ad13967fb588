"""The layout registry: built-in layouts plus any a third party registers through the
`eagle3_convert.layouts` entry-point group (each entry point names a `Layout` instance)."""

from __future__ import annotations

from importlib import import_module

from ..entry_points import none_declare
from ..errors import FormatError, UsageError
from ..names import LAYOUTS
from .base import Checkpoint, Detection, Layout

ENTRY_POINT_GROUP = "eagle3_convert.layouts"

_layouts: dict[str, Layout] = {}
_broken_plugins: dict[str, str] = {}  # entry-point name -> why it did not load


def register(layout: Layout) -> None:
    _layouts[layout.name] = layout


def layouts() -> dict[str, Layout]:
    """Every known layout by name, loaded once."""
    if not _layouts:
        for name in LAYOUTS:
            register(import_module(f"{__package__}.{name}").LAYOUT)
        for ep in _entry_points():
            try:
                layout = ep.load()
            except Exception as exc:  # a broken third-party plugin must not break the built-in layouts
                _broken_plugins[ep.name] = f"{type(exc).__name__}: {str(exc)[:120]}"
                continue
            if isinstance(layout, Layout) and layout.name not in _layouts:
                register(layout)
            elif not isinstance(layout, Layout):
                _broken_plugins[ep.name] = f"{ep.value} is a {type(layout).__name__}, not a Layout"
    return _layouts


def _entry_points() -> list:
    """The group's entry points, looked up with importlib.metadata only when an installed package may declare one."""
    if none_declare(ENTRY_POINT_GROUP):
        return []
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


def get_layout(name: str) -> Layout:
    known = layouts()
    if name in _broken_plugins:
        raise UsageError(f"layout plugin {name!r} failed to load ({_broken_plugins[name]})",
                         "reinstall or fix the package that provides it", code="E-LAYOUT-PLUGIN")
    if name not in known:
        raise UsageError(f"unknown layout {name!r}", f"choose one of: {', '.join(known)}", code="E-LAYOUT-UNKNOWN")
    return known[name]


def detect(ckpt: Checkpoint) -> Detection:
    """The one layout this checkpoint is in, or an error that says why it cannot be decided. Decided once per
    checkpoint: the answer is kept on it."""
    if ckpt.detection is None:
        ckpt.detection = _detect(ckpt)
    return ckpt.detection


def _detect(ckpt: Checkpoint) -> Detection:
    written_as = (ckpt.sidecar or {}).get("layout")  # present only while config.json is the one we wrote
    if written_as in layouts():
        return Detection(written_as, True, f"eagle3-convert wrote it as {written_as} (eagle3-convert.json matches "
                                           "config.json)")
    found = [d for d in (layout.detect(ckpt) for layout in layouts().values()) if d is not None]
    confident = [d for d in found if d.confident]
    if len(confident) == 1:
        return confident[0]
    if not confident and len(found) == 1:
        return found[0]
    if not found:
        raise FormatError(f"{ckpt.path}: not a known EAGLE-3 drafter layout (config.json has neither "
                          "speculators_model_type nor an Eagle3 architecture)",
                          f"pass --from with one of: {', '.join(layouts())}", code="E-LAYOUT-UNKNOWN")
    reasons = "; ".join(f"{d.layout}: {d.reason}" for d in (confident or found))
    raise FormatError(f"{ckpt.path}: the layout is ambiguous ({reasons})",
                      "pass --from to say which layout it is", code="E-LAYOUT-AMBIGUOUS")
