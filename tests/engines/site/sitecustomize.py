"""Placeholder modules for the few packages the engines import but never use on the loading path.

Put on PYTHONPATH (only) by tests/test_engines.py when it runs a probe under the engines'
venv, so that subprocesses the engines start themselves (vLLM inspects its model registry in
one) see the same placeholders. Placeholders, and nothing else:
  torchvision, tvm_ffi   imported at module level by SGLang (multimodal utils, all-reduce kernels)
  xgrammar, llguidance   imported at module level by vLLM (structured output)
Any attribute of a placeholder is a class whose attributes are classes again, so `from x import
Y`, subclassing and decorators at import time work; nothing here is ever called on the paths
the tier checks (config parsing, model registry, model __init__, load_weights, forward).
"""

import importlib.abc
import importlib.machinery
import sys
import types

PLACEHOLDERS = ("torchvision", "tvm_ffi", "xgrammar", "llguidance")


def _any_schema(cls, source, handler):
    """A placeholder used as a pydantic field type (SGLang's OpenAI protocol) accepts anything."""
    from pydantic_core import core_schema

    return core_schema.any_schema()


def _placeholder_class(name):
    return _Meta(name, (), {"__get_pydantic_core_schema__": classmethod(_any_schema)})


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder_class(name)

    def __call__(cls, *args, **kwargs):
        return cls


class _Placeholder(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _placeholder_class(name)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in PLACEHOLDERS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Placeholder(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
