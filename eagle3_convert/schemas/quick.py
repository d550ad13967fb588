"""Is a config valid against a layout's schema? Answered without jsonschema for the keywords our schemas use.

Importing jsonschema (and referencing, attrs, rpds) costs ~25 ms, a quarter of a header-level `validate` (issue
16), and almost every config is valid. So `violations` asks this first: `valid()` returns True only when the
instance passes every keyword below, False when one fails, and None when a schema holds a keyword it does not
know (then jsonschema decides). Only a True skips jsonschema; a False still goes to jsonschema, which words
the violations, so every message is jsonschema's as before. `tests/test_schemas_quick.py` checks the verdicts
against jsonschema's on every config in the tests and on mutations of each.
"""

from __future__ import annotations

from typing import Any, Callable

# Annotations only: they assert nothing about the instance.
_IGNORED = frozenset({"$schema", "$id", "$defs", "title", "description", "examples", "default", "$comment"})
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    # draft 2020-12 (and jsonschema): 1.0 is an integer
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


class _Unknown(Exception):
    """A keyword (or $ref) this checker does not implement: let jsonschema decide."""


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema has it: true is not 1, 1 is 1.0, containers compared item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _number(a) and _number(b):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if a is None or b is None:
        return a is None and b is None
    raise _Unknown


def _pointer(doc: Any, fragment: str) -> Any:
    for part in fragment.lstrip("/").split("/") if fragment else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(doc, dict) or part not in doc:
            raise _Unknown
        doc = doc[part]
    return doc


class _Checker:
    def __init__(self, load: Callable[[str], dict[str, Any]]) -> None:
        self.load = load  # schema name ("decoder") -> document

    def ok(self, schema: Any, v: Any, doc: str) -> bool:
        if schema is True or schema == {}:
            return True
        if not isinstance(schema, dict):
            raise _Unknown
        for key, want in schema.items():
            if key in _IGNORED:
                continue
            check = getattr(self, "k_" + ("ref" if key == "$ref" else key), None)
            if check is None or key.startswith("$") and key != "$ref":
                raise _Unknown
            if not check(want, v, doc):
                return False
        return True

    def k_ref(self, ref: str, v: Any, doc: str) -> bool:
        name, _, fragment = ref.partition("#")
        if name:
            if not name.endswith(".json") or "/" in name:
                raise _Unknown
            doc = name.removesuffix(".json")
        return self.ok(_pointer(self.load(doc), fragment), v, doc)

    def k_type(self, want: Any, v: Any, doc: str) -> bool:
        names = want if isinstance(want, list) else [want]
        if any(n not in _TYPES for n in names):
            raise _Unknown
        return any(_TYPES[n](v) for n in names)

    def k_properties(self, want: dict[str, Any], v: Any, doc: str) -> bool:
        return not isinstance(v, dict) or all(self.ok(s, v[k], doc) for k, s in want.items() if k in v)

    def k_required(self, want: list[str], v: Any, doc: str) -> bool:
        return not isinstance(v, dict) or all(k in v for k in want)

    def k_items(self, want: Any, v: Any, doc: str) -> bool:
        return not isinstance(v, list) or all(self.ok(want, x, doc) for x in v)

    def k_contains(self, want: Any, v: Any, doc: str) -> bool:
        return not isinstance(v, list) or any(self.ok(want, x, doc) for x in v)

    def k_minItems(self, want: int, v: Any, doc: str) -> bool:
        return not isinstance(v, list) or len(v) >= want

    def k_maxItems(self, want: int, v: Any, doc: str) -> bool:
        return not isinstance(v, list) or len(v) <= want

    def k_minLength(self, want: int, v: Any, doc: str) -> bool:
        return not isinstance(v, str) or len(v) >= want

    def k_minimum(self, want: Any, v: Any, doc: str) -> bool:
        return not _number(v) or v >= want

    def k_maximum(self, want: Any, v: Any, doc: str) -> bool:
        return not _number(v) or v <= want

    def k_exclusiveMinimum(self, want: Any, v: Any, doc: str) -> bool:
        return not _number(v) or v > want

    def k_const(self, want: Any, v: Any, doc: str) -> bool:
        return _equal(want, v)

    def k_enum(self, want: list[Any], v: Any, doc: str) -> bool:
        return any(_equal(x, v) for x in want)

    def k_allOf(self, want: list[Any], v: Any, doc: str) -> bool:
        return all(self.ok(s, v, doc) for s in want)

    def k_oneOf(self, want: list[Any], v: Any, doc: str) -> bool:
        return sum(1 for s in want if self.ok(s, v, doc)) == 1

    def k_not(self, want: Any, v: Any, doc: str) -> bool:
        return not self.ok(want, v, doc)


def valid(layout: str, instance: Any, load: Callable[[str], dict[str, Any]]) -> bool | None:
    """True: `instance` passes `layout`'s schema; False: it fails somewhere; None: not decidable here."""
    try:
        return _Checker(load).ok(load(layout), instance, layout)
    except (_Unknown, RecursionError, TypeError):
        return None
