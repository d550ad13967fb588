"""The layout registry: built-in layouts plus any a third party registers through the
`eagle3_convert.layouts` entry-point group (each entry point names a `Layout` instance)."""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

from pydantic import ValidationError

from ..drafter import Drafter
from ..entry_points import none_declare
from ..errors import Eagle3Error, FormatError, RefusalError, UsageError
from ..fingerprint import reading_differences
from ..names import LAYOUTS
from .base import Checkpoint, ConvertOptions, Detection, Layout
from .quantized import plan as plan_layout  # noqa: F401 (re-exported: a layout's plan, with its quantization config)
from .config_keys import foreign_semantic_keys

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
        refuse_target_model(ckpt)
        raise FormatError(f"{ckpt.path}: not a known EAGLE-3 drafter layout (config.json has neither "
                          "speculators_model_type nor an Eagle3 architecture)",
                          f"pass --from with one of: {', '.join(layouts())}", code="E-LAYOUT-UNKNOWN")
    reasons = "; ".join(f"{d.layout}: {d.reason}" for d in (confident or found))
    raise FormatError(f"{ckpt.path}: the layout is ambiguous ({reasons})",
                      "pass --from to say which layout it is", code="E-LAYOUT-AMBIGUOUS")


def refuse_target_model(ckpt: Checkpoint) -> None:
    """A target model given as SRC: a plain transformers model (no drafter class or key) whose weights hold its
    decoder stack and no fc, the layer every EAGLE-3 drafter fuses the captured states with."""
    config = ckpt.config or {}
    archs = [a for a in config.get("architectures") or () if isinstance(a, str)] \
        if isinstance(config.get("architectures"), list) else []
    names = list(ckpt.tensors)
    decoder = [n for n in names if n.startswith(("model.layers.", "model.embed_tokens.", "model.language_model."))]
    if not archs or not decoder or any(n.split(".")[-2:] == ["fc", "weight"] for n in names) or \
            "speculators_model_type" in config or "draft_vocab_size" in config:
        return
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = text.get("num_hidden_layers")
    raise FormatError(f"{ckpt.path}: this is a target model, not a drafter (architectures {archs}"
                      + (f", {layers} layers" if isinstance(layers, int) else "") + ", no fc.weight)",
                      "pass the EAGLE-3 drafter's directory as SRC; the target it drafts for goes to --target (its "
                      "depth and family), and to the verify command as the model it runs", code="E-SRC-IS-TARGET")


def judge_explicit_from(ckpt, given: str, options: ConvertOptions, drafter: Drafter | None = None,
                        error: Exception | None = None) -> Eagle3Error | None:
    """The one judgement convert and validate make of an explicit --from (issue 12): where detection
    confidently prefers another layout, a --from whose reader fails, leaves keys of the file unread that the
    detected layout's engines read, or reads another drafter, is refused, naming the detected layout."""
    try:
        detected = detect(ckpt)
    except Eagle3Error as exc:  # ambiguous or unknown: --from is how the user settles it; a target model it is not
        return exc if exc.code == "E-SRC-IS-TARGET" else None
    if detected.layout == given or not detected.confident:
        return None
    this = f"the checkpoint is in the {detected.layout} layout ({detected.reason})"
    hint = f"drop --from, or pass --from {detected.layout}"
    if error is not None:
        # the reader's own code beside its reason: this refusal's code follows the whole message
        code = f" ({error.code})" if isinstance(error, Eagle3Error) else ""
        reason = getattr(error, "message", str(error))
        return RefusalError(f"--from {given} cannot read it: {this}; the {given} reader refuses it{code}: {reason}",
                            hint, code="E-FROM-MISMATCH")
    unread = [path[2:] for path in foreign_semantic_keys(given, ckpt.config)]
    if unread:
        return RefusalError(f"--from {given} leaves {', '.join(unread[:4])} unread, which the {detected.layout} "
                            f"layout's engines read: {this}", hint, code="E-FROM-MISMATCH")
    if drafter is not None:
        try:
            refuse_another_reading(ckpt, drafter, given, options)
        except RefusalError as exc:
            return exc
    return None


def refuse_another_reading(ckpt, drafter: Drafter, given: str, options: ConvertOptions) -> None:
    """An explicit --from must read the drafter that detection's layout reads, or nothing: otherwise the
    drafter (and its id) would depend on --from. Ambiguous or unreadable detection: --from settles it."""
    try:
        detected = detect(ckpt)
    except Eagle3Error:
        return
    if detected.layout == given or not detected.confident:
        return
    try:
        other = ckpt.read_as(get_layout(detected.layout), options)
    except Eagle3Error:
        return
    except ValidationError:
        return
    differences = reading_differences(drafter, other, (given, detected.layout))
    if differences:
        raise RefusalError(f"--from {given} reads another drafter from this {detected.layout} checkpoint than its "
                           f"own layout does: {'; '.join(differences[:2])}",
                           f"drop --from (detected {detected.layout}: {detected.reason})", code="E-FROM-MISMATCH")
