"""Models that behave as their pydantic twins without importing pydantic on the common path (issue 16).

Importing pydantic and building its model classes costs ~60 ms, over half of a header-level `validate`. A
`PlainModel` checks its fields itself, exact types only: an int field takes an int (not a bool, a float or a
string), a `dict[str, Any]` a dict with string keys, and so on, exactly the inputs pydantic keeps as given.
Anything else (a missing or unknown field, a value pydantic would coerce or refuse, a failed model check) goes
to the pydantic twin (`twin()`, imported then): it raises its own ValidationError, word for word as before, or
coerces as it always did, and the plain model takes the twin's values. So a value a PlainModel holds is the
value the pydantic model would hold. `model_dump` likewise serializes plain JSON-like data itself and hands
anything else to the twin. tests/test_plainmodel.py checks both against pydantic on configs and mutations.
"""

from __future__ import annotations

import math
import sys
from datetime import datetime
from typing import Any, Callable, ClassVar, Iterator

_MISSING = object()
REQUIRED = _MISSING  # the default of a field that has none
UNDECIDED = _MISSING  # what a check answers for a value it does not take as given: the twin decides
Check = Callable[[Any], Any]  # value -> the value pydantic would hold, or _MISSING: let pydantic decide


def is_validation_error(exc: BaseException) -> bool:
    """A pydantic ValidationError (one can exist only once pydantic has been imported)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(exc, pydantic.ValidationError)


# ------------------------------------------------------------------ field checks: exact types, as pydantic keeps them
def int_(lo: int | None = None, gt: bool = False) -> Check:
    def check(v: Any) -> Any:
        if type(v) is not int or (lo is not None and (v <= lo if gt else v < lo)):
            return _MISSING
        return v
    return check


def exact(kind: type) -> Check:
    return lambda v: v if type(v) is kind else _MISSING


def literal(*values: str) -> Check:
    return lambda v: v if type(v) is str and v in values else _MISSING


def optional(inner: Check) -> Check:
    return lambda v: None if v is None else inner(v)


def str_dict(values: Check | None = None) -> Check:
    def check(v: Any) -> Any:
        if type(v) is not dict or any(type(k) is not str for k in v):
            return _MISSING
        if values is None:
            return dict(v)
        out = {k: values(x) for k, x in v.items()}
        return _MISSING if any(x is _MISSING for x in out.values()) else out
    return check


def list_of(inner: Check) -> Check:
    def check(v: Any) -> Any:
        if type(v) is not list:
            return _MISSING
        out = [inner(x) for x in v]
        return _MISSING if any(x is _MISSING for x in out) else out
    return check


def model(cls_name: str) -> Check:
    """A nested PlainModel: an instance is kept as it is (pydantic does not revalidate one), a dict is validated."""
    def check(v: Any) -> Any:
        cls = _REGISTRY[cls_name]
        if isinstance(v, cls):
            return v
        if type(v) is dict and all(type(k) is str for k in v):
            values = cls._fast(v)
            return _MISSING if values is None else cls._new(values)
        return _MISSING
    return check


_REGISTRY: dict[str, type[PlainModel]] = {}


class _TwinAttribute:
    """A pydantic class attribute (model_fields, model_json_schema, ...), read from the twin when asked for."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type[PlainModel]) -> Any:
        return getattr(owner.twin(), self.name)


class PlainModel:
    # name -> (default or _MISSING when required, default factory or None, check)
    FIELDS: ClassVar[dict[str, tuple[Any, Callable[[], Any] | None, Check]]] = {}
    TWIN: ClassVar[tuple[str, str]]  # (module, class) of the pydantic model this one stands for
    model_fields = _TwinAttribute("model_fields")
    model_json_schema = _TwinAttribute("model_json_schema")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

    def __init__(self, **data: Any) -> None:
        values = self._fast(data)
        self.__dict__.update(self._from_twin(data) if values is None else values)

    # -------------------------------------------------------------- validation
    def check(self) -> bool:
        """The model-level check (pydantic's model_validator); False: let the twin raise its error."""
        return True

    @classmethod
    def _before(cls, data: dict[str, Any]) -> dict[str, Any]:
        """What pydantic's mode="before" field validators do to the input, on the plain path and the twin's."""
        return data

    @classmethod
    def _fast(cls, data: dict[str, Any]) -> dict[str, Any] | None:
        data = cls._before(data)
        if any(k not in cls.FIELDS for k in data):
            return None  # extra="forbid": the twin names the key
        values = {}
        for name, (default, factory, check) in cls.FIELDS.items():
            if name in data:
                value = check(data[name])
                if value is _MISSING:
                    return None
            elif factory is not None:
                value = factory()
            elif default is _MISSING:
                return None
            else:
                value = default
            values[name] = value
        return values if cls._new(values).check() else None

    @classmethod
    def _new(cls, values: dict[str, Any]) -> Any:
        obj = cls.__new__(cls)
        obj.__dict__.update(values)
        return obj

    @classmethod
    def twin(cls) -> Any:
        module, name = cls.TWIN
        __import__(module)
        return getattr(sys.modules[module], name)

    @classmethod
    def _from_twin(cls, data: dict[str, Any]) -> dict[str, Any]:
        checked = cls.twin()(**{k: _to_twin(v) for k, v in cls._before(data).items()})  # raises pydantic's ValidationError
        return {name: _from_twin(getattr(checked, name)) for name in cls.FIELDS}

    @classmethod
    def model_validate(cls, obj: Any) -> Any:
        if isinstance(obj, cls):
            return obj
        if type(obj) is dict and all(type(k) is str for k in obj):
            return cls(**obj)
        return cls._new(cls._from_twin_validate(obj))

    @classmethod
    def _from_twin_validate(cls, obj: Any) -> dict[str, Any]:
        checked = cls.twin().model_validate(obj)
        return {name: _from_twin(getattr(checked, name)) for name in cls.FIELDS}

    # -------------------------------------------------------------- pydantic's instance API, as used here
    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        if deep:
            import copy

            return copy.deepcopy(self).model_copy(update=update)
        return self._new({**self.__dict__, **(update or {})})

    def model_dump(self, *, mode: str = "python", exclude: set[str] | None = None, **more: Any) -> dict[str, Any]:
        if not more and mode in ("python", "json"):
            try:
                return {k: _dump(v, mode) for k, v in self.__dict__.items() if not exclude or k not in exclude}
            except _Unplain:
                pass
        return self.twin().model_validate(_to_twin(self)).model_dump(mode=mode, exclude=exclude, **more)

    def __eq__(self, other: Any) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  (as a pydantic model: mutable, unhashable)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        yield from self.__dict__.items()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


class _Unplain(Exception):
    """A value model_dump does not serialize itself: the twin does."""


def _dump(v: Any, mode: str) -> Any:
    if v is None or type(v) in (str, int, bool):
        return v
    if type(v) is datetime and mode == "python":
        return v  # kept as it is (JSON spells it the twin's way)
    if type(v) is float:
        if mode == "json" and not math.isfinite(v):
            raise _Unplain
        return v
    if type(v) is dict:
        return {k: _dump(x, mode) for k, x in v.items()}
    if type(v) is list:
        return [_dump(x, mode) for x in v]
    if type(v) is tuple:
        items = [_dump(x, mode) for x in v]
        return items if mode == "json" else tuple(items)
    if isinstance(v, PlainModel):
        return v.model_dump(mode=mode)
    raise _Unplain


def _to_twin(v: Any) -> Any:
    """A value for the pydantic twin: nested plain models as dicts of their fields (valid: they validate again),
    also inside lists; a list holding none is passed on as it is."""
    if isinstance(v, PlainModel):
        return {k: _to_twin(x) for k, x in v.__dict__.items()}
    if type(v) is list and any(isinstance(x, PlainModel) for x in v):
        return [_to_twin(x) for x in v]
    return v


def _from_twin(v: Any) -> Any:
    """A value the twin validated, with its nested pydantic models as the plain ones."""
    cls = _REGISTRY.get(type(v).__name__)
    if cls is not None and type(v).__module__ == cls.TWIN[0]:
        return cls._new({name: _from_twin(getattr(v, name)) for name in cls.FIELDS})
    if type(v) is list and any(type(x).__name__ in _REGISTRY for x in v):
        return [_from_twin(x) for x in v]
    return v
