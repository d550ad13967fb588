"""Run under the llama.cpp venv: load GGUFs with llama.cpp (llama-cpp-python's libllama) and report, as JSON,
what the loaded models hold. Usage: probe.py LABEL=PATH ...  (every assertion is made by tests/test_llamacpp.py)."""

import ctypes
import json
import sys

import llama_cpp

lib = llama_cpp.llama_cpp._lib


def ext(name: str, mangled: str):
    """A function of src/llama-ext.h. It is LLAMA_API (exported) but that staging header has no extern "C", so
    libllama exports it under its C++ (Itanium ABI) name; the plain name is tried first, for later builds."""
    try:
        return getattr(lib, name)
    except AttributeError:
        return getattr(lib, mangled)


# llama.cpp 0c1e57098, vendored by llama-cpp-python 0.3.36; not bound in llama_cpp.py
target_layer_ids = ext("llama_model_target_layer_ids", "_Z28llama_model_target_layer_idsPK11llama_model")
target_layer_ids.argtypes = [ctypes.c_void_p]
target_layer_ids.restype = ctypes.POINTER(ctypes.c_int32)
target_layer_ids_n = ext("llama_model_target_layer_ids_n", "_Z30llama_model_target_layer_ids_nPK11llama_model")
target_layer_ids_n.argtypes = [ctypes.c_void_p]
target_layer_ids_n.restype = ctypes.c_uint32


def meta(model, key: str) -> str | None:
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode() if n >= 0 else None


llama_cpp.llama_backend_init()
out = {"llama_cpp_python": llama_cpp.__version__}
for arg in sys.argv[1:]:
    label, path = arg.split("=", 1)
    params = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    if not model:
        out[label] = {"loaded": False}
        continue
    n = target_layer_ids_n(model)
    ids = target_layer_ids(model)
    out[label] = {
        "loaded": True,
        "architecture": meta(model, "general.architecture"),
        "n_layer": llama_cpp.llama_model_n_layer(model),
        "n_embd": llama_cpp.llama_model_n_embd(model),
        "n_vocab": llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model)),
        "target_layer_ids": [ids[i] for i in range(n)] if ids else [],
    }
    llama_cpp.llama_model_free(model)
print(json.dumps(out))
