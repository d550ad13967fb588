"""Write eagle3_convert/converters/model_config_keys.txt: every attribute name a transformers model config class
defines, for the config-key table (converters/config_keys.py). A drafter's config.json often carries its target
family's own fields (AngelSlim's Hunyuan drafter: `eod_token_id`); such a key is no misspelling of ours, though it
may sit one edit from a key we read (`ptd_token_id`). The product never imports transformers: it reads this list.

    PYTHONPATH=$PWD python tools/model_config_keys.py      # with the transformers pinned in pyproject's test extra

The names: each `configuration_*` module of transformers.models, each PretrainedConfig subclass defined there: its
__init__ parameters, its annotations and the keys of its default instance's to_dict(). tests/test_config_keys_families.py
regenerates the list and checks it equals the shipped one.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "eagle3_convert" / "converters" / "model_config_keys.txt"


def model_config_keys() -> tuple[str, set[str]]:
    """transformers' version, and the attribute names of its model config classes."""
    import transformers
    import transformers.models
    from transformers import PretrainedConfig

    transformers.logging.set_verbosity_error()  # default instances warn about their own token ids
    logging.disable(logging.WARNING)
    keys: set[str] = set()
    for family in pkgutil.iter_modules(transformers.models.__path__):
        package = importlib.import_module(f"transformers.models.{family.name}")
        for module in pkgutil.iter_modules(getattr(package, "__path__", [])):
            if not module.name.startswith("configuration_"):
                continue
            loaded = importlib.import_module(f"{package.__name__}.{module.name}")
            for _, cls in inspect.getmembers(loaded, inspect.isclass):
                if not issubclass(cls, PretrainedConfig) or cls.__module__ != loaded.__name__:
                    continue
                keys |= set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs"}
                keys |= set(getattr(cls, "__annotations__", {}))
                try:
                    keys |= set(cls().to_dict())
                except Exception:  # a composite config that needs its parts: its signature says enough
                    pass
    return transformers.__version__, {k for k in keys if k.isidentifier()}


def render(version: str, keys: set[str]) -> str:
    return (f"# transformers {version}: the attribute names of its model config classes (tools/model_config_keys.py)\n"
            + "".join(f"{k}\n" for k in sorted(keys)))


if __name__ == "__main__":
    OUT.write_text(render(*model_config_keys()), encoding="utf-8")
    sys.stderr.write(f"wrote {OUT}\n")
