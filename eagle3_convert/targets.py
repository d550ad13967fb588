"""The target (verifier) model: read its config.json to learn depth, width, vocab and family."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .converters.base import EAGLE3_ARCHITECTURES, read_json_file
from .engines.vllm import mrope_section
from .target_identity import TargetIdentity, config_digest, local_names
from .errors import FormatError
from .sources import HubError, both_readings, fetch_config, has_repo_id_shape, is_repo_id
from .json_values import is_int


def target_from_config(config: dict[str, Any], name_or_path: str | None, revision: str | None = None) -> TargetIdentity:
    # Multimodal targets (e.g. Llama-4, Qwen-VL) keep the language model under text_config.
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    archs = config.get("architectures")

    def num(key: str) -> int | None:
        value = text.get(key, config.get(key))
        return value if is_int(value) else None

    return TargetIdentity(
        name_or_path=name_or_path,
        revision=revision,
        architectures=[a for a in archs if isinstance(a, str)] if isinstance(archs, list) else [],
        model_type=text.get("model_type") or config.get("model_type"),
        num_hidden_layers=num("num_hidden_layers"),
        hidden_size=num("hidden_size"),
        vocab_size=num("vocab_size"),
        config_sha256=config_digest(config),
    ).serving(context_length(config), mrope_section(config) is not None)


def context_length(config: dict[str, Any]) -> int | None:
    """The target's context length (max_position_embeddings), for drafters that must cover it."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    value = text.get("max_position_embeddings", config.get("max_position_embeddings"))
    return value if is_int(value) else None


def refuse_drafter_as_target(spec: str, config: dict[str, Any]) -> None:
    """A drafter's own config given as the target would set depth 1 and the draft vocab: every capture
    layer would read as out of range, or be translated for the wrong model."""
    archs = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    marks = [m for m, present in (("speculators_model_type", "speculators_model_type" in config),
                                  ("draft_vocab_size", "draft_vocab_size" in config),
                                  (f"architectures {archs}", any(a in EAGLE3_ARCHITECTURES for a in archs)))
             if present]
    if marks:
        raise FormatError(f"target {spec!r} is an EAGLE-3 drafter ({', '.join(marks)}), not the target model it "
                          "proposes for", "pass the TARGET model's config.json, its directory or its Hub repo id "
                          "(e.g. meta-llama/Llama-3.1-8B-Instruct) as --target", code="E-TARGET-IS-DRAFTER")


def load_target(spec: str, revision: str | None = None, name_or_path: str | None = None, *,
                endpoint: str | None = None, token: str | None = None) -> TargetIdentity:
    """A target from a local config.json or a directory holding one, or a Hub repo id. A local copy is known by
    every name it has (target_identity.local_names: never a relative path), its digest and its facts."""
    config, commit = read_target_config(spec, revision, endpoint=endpoint, token=token)
    refuse_drafter_as_target(spec, config)
    if commit is not None or not Path(spec).exists():
        return target_from_config(config, name_or_path or spec, commit or revision)
    root = spec if Path(spec).is_dir() else str(Path(spec).parent)
    names, snapshot_revision = local_names(root)
    identity = target_from_config(config, name_or_path or local_target_name(spec, config, names),
                                  revision or snapshot_revision)
    return identity.named_also(*names).serving(identity.context_length, identity.uses_mrope)


def local_target_name(spec: str, config: dict[str, Any], names: list[str]) -> str:
    """How a target read from a local copy is named: the Hub repo its config says it came from
    (`_name_or_path`, as transformers saves it), else the repo of the Hub cache snapshot it is, else its
    absolute path (`names[0]`), which no later reader (a model card's base_model, a publish from another
    directory) can mistake for a repo id."""
    named = config.get("_name_or_path")
    if isinstance(named, str) and has_repo_id_shape(named) and not Path(named).exists():
        return named
    return names[-1]


def read_target_config(spec: str, revision: str | None = None, *, endpoint: str | None = None,
                       token: str | None = None) -> tuple[dict[str, Any], str | None]:
    """A target's raw config.json (local file, its directory, or Hub repo id) and the Hub commit, if any."""
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return read_json_file(path, f"target config {spec}"), None

    if is_repo_id(spec):  # never a local-looking path: that is reported missing, not asked of the Hub
        try:
            return fetch_config(spec, revision, endpoint=endpoint, token=token)
        except HubError as exc:
            raise both_readings(f"target {spec}", "no such config file or directory", exc) from None
    raise FormatError(f"target {spec}: no such config file or directory",
                      "pass the target's config.json, its directory, or its Hub repo id", code="E-TARGET-MISSING")
