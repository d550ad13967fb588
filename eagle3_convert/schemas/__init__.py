"""JSON Schemas (draft 2020-12) of each layout's config.json, and their application.

One file per layout (`<layout>.json`) plus `decoder.json`, the Hugging Face decoder keys
they share (flat in most layouts, under `transformer_layer_config` in speculators). The
schemas describe what a layout's readers and engines accept; checks that need more than
the config (tensor shapes, the target) live in `eagle3_convert.validate`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

BASE_URI = "https://schemas.eagle3-convert.invalid/"
SHARED = ("decoder",)  # referenced by the layout schemas, not a layout's config itself
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REQUIRED = re.compile(r"^'(.+)' is a required property$")


@dataclass(frozen=True)
class Violation:
    path: str  # JSON path of the offending value, e.g. $.eagle_config.eagle_aux_hidden_state_layer_ids[0]
    message: str


def layouts_with_schema() -> list[str]:
    return sorted(p.name.removesuffix(".json") for p in files(__package__).iterdir()
                  if p.name.endswith(".json") and p.name.removesuffix(".json") not in SHARED)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The schema document `<name>.json` shipped in this package."""
    return json.loads(files(__package__).joinpath(f"{name}.json").read_text(encoding="utf-8"))


def _draft_validator(schema: dict[str, Any], base: str, documents: dict[str, dict[str, Any]]):
    """jsonschema's draft 2020-12 validator of `schema`, its $refs resolved among `documents` (by name under `base`)."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry = Registry().with_resources((base + f"{name}.json", Resource.from_contents(document))
                                         for name, document in documents.items())
    return Draft202012Validator(schema, registry=registry)


@cache
def _validator(layout: str):
    # Not check_schema'd here: the shipped schemas are checked against the metaschema by tests/test_schemas.py,
    # and doing it again on every validate/inspect cost ~6 ms of start-up (issue 16).
    return _draft_validator(load_schema(layout), BASE_URI,
                            {name: load_schema(name) for name in (*SHARED, *layouts_with_schema())})


def json_path(parts: Any) -> str:
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def violations(layout: str, config: dict[str, Any]) -> list[Violation] | None:
    """Every place `config` breaks `layout`'s schema (None: no schema for that layout)."""
    if layout not in layouts_with_schema():
        return None
    out = []
    for error in sorted(_validator(layout).iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        parts = list(error.absolute_path)
        missing = _REQUIRED.match(error.message) if error.validator == "required" else None
        if missing:
            parts.append(missing.group(1))  # name the missing key itself, not its parent
            out.append(Violation(json_path(parts), "is required but absent"))
            continue
        message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
        if error.validator == "not" and isinstance(error.validator_value, dict):
            # A forbidden key or combination: name it and say why instead of echoing the whole object.
            forbidden = error.validator_value.get("required") or []
            if len(forbidden) == 1:
                parts.append(forbidden[0])
            message = error.validator_value.get("description") or f"forbidden: {', '.join(forbidden)}"
        out.append(Violation(json_path(parts), message))
    return out


# ------------------------------------------------------------------ the JSON type of each config key

@dataclass(frozen=True)
class KeyType:
    kind: str  # a JSON type; "positive" is an integer >= 1 ($defs/positive), "array of <kind>" a list of one kind
    nullable: bool


_JSON_TYPE = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _resolve(ref: str, doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The node `ref` names ("decoder.json#/$defs/positive", "#/$defs/rope") and the document holding it."""
    name, _, pointer = ref.partition("#")
    document = load_schema(name.removesuffix(".json")) if name else doc
    node = document
    for part in filter(None, pointer.split("/")):
        node = node[part]
    return node, document


def _key_type(node: dict[str, Any], doc: dict[str, Any]) -> tuple[KeyType, bool] | None:
    """The type a property's schema gives, and whether it comes only from a `const` or `enum` (a value restriction)."""
    if "$ref" in node:
        return _key_type(*_resolve(node["$ref"], doc))
    if "oneOf" in node:
        alternatives = [t for t, _ in filter(None, (_key_type(a, doc) for a in node["oneOf"]))]
        kinds = {t.kind for t in alternatives} - {"null"}
        if len(kinds) != 1:
            raise ValueError(f"a oneOf of {sorted(kinds)}: no one type")
        return KeyType(kinds.pop(), any(t.nullable or t.kind == "null" for t in alternatives)), False
    if "type" in node:
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        kind = next((t for t in types if t != "null"), "null")
        if kind == "integer" and node.get("minimum", 0) >= 1:
            kind = "positive"
        elif kind == "array":
            items = _key_type(node.get("items", {}), doc)
            kind = f"array of {items[0].kind if items else 'any'}".replace("positive", "integer")
        return KeyType(kind, "null" in types and kind != "null"), False
    values = [node["const"]] if "const" in node else node.get("enum")
    kinds = {_JSON_TYPE.get(type(v), "any") for v in values or ()}
    return (KeyType(kinds.pop(), False), True) if len(kinds) == 1 else None


@cache
def config_key_types() -> dict[str, KeyType]:
    """The JSON type the config schemas give each key, by name, wherever it is declared: the home of the key
    types `converters.config_keys` checks. A key declared in several places has one kind there, null allowed
    if one place allows it; a `const` or `enum` gives the type only to a key no place types otherwise."""
    found: dict[str, list[tuple[KeyType, bool]]] = {}

    def walk(node: Any, doc: dict[str, Any]) -> None:
        if isinstance(node, dict):
            for key, sub in (node.get("properties") or {}).items():
                declared = _key_type(sub, doc)
                if declared is not None:
                    found.setdefault(key, []).append(declared)
            for sub in node.values():
                walk(sub, doc)
        elif isinstance(node, list):
            for sub in node:
                walk(sub, doc)

    for name in (*SHARED, *layouts_with_schema()):
        walk(load_schema(name), load_schema(name))
    out = {}
    for key, declarations in found.items():
        typed = [t for t, restriction in declarations if not restriction] or [t for t, _ in declarations]
        kinds = {t.kind for t in typed}
        if len(kinds) != 1:
            raise ValueError(f"the schemas give config key {key!r} more than one type: {sorted(kinds)}")
        out[key] = KeyType(kinds.pop(), any(t.nullable for t, _ in declarations))
    return out


# ------------------------------------------------------------------ the --json output documents (docs/json.md)

OUTPUT_BASE_URI = BASE_URI + "output/"


def output_schema_name(command: str | None) -> str:
    """`registry list` -> `registry-list`; a usage error before any command ran -> `usage`."""
    return command.replace(" ", "-") if command else "usage"


def output_schema_names() -> list[str]:
    return sorted(p.name.removesuffix(".json") for p in files(__package__).joinpath("output").iterdir()
                  if p.name.endswith(".json") and p.name != "common.json")


@cache
def load_output_schema(name: str) -> dict[str, Any]:
    return json.loads(files(__package__).joinpath("output", f"{name}.json").read_text(encoding="utf-8"))


@cache
def _output_validator(name: str):
    validator = _draft_validator(load_output_schema(name), OUTPUT_BASE_URI,
                                 {n: load_output_schema(n) for n in ("common", *output_schema_names())})
    validator.check_schema(validator.schema)
    return validator


def output_violations(doc: dict[str, Any]) -> list[Violation]:
    """Where a --json document breaks the schema of the command that printed it (its `command` field)."""
    command = doc.get("command") if isinstance(doc, dict) else None
    name = output_schema_name(command if isinstance(command, str) else None)
    # A group's usage error (`registry lst`) is answered before any command of it ran.
    validator = _output_validator(name if name in output_schema_names() else "usage")
    return [Violation(json_path(e.absolute_path), e.message[:200]) for e in validator.iter_errors(doc)]
