"""The names users type and modules share: layouts, engines (and the runners we replay), capture conventions.

A leaf: it imports nothing, so the CLI's `--help` reads it without loading a layout or an engine. Every
command, the layout registry, the engine modules, validate and the docs take these names from here.
"""

from __future__ import annotations

# The built-in layouts, in the order --help lists them, with who writes and serves each (a plugin may add
# more: converters/registry.py).
LAYOUT_SUMMARIES = {
    "speculators": "vllm-project/speculators trainer output; vLLM serves it",
    "sglang": "SGLang LlamaForCausalLMEagle3 (SpecForge export); sglang.launch_server",
    "vllm": "vLLM-native Eagle3 config (ids top level and nested); vllm serve",
    "eagle": "SafeAILab EAGLE-3 (yuhuili/EAGLE3-*, .bin); written as safetensors",
    "modelopt": "NVIDIA ModelOpt HF export (NVIDIA eagle_config); vLLM, TensorRT-LLM",
    "gguf": "llama.cpp GGUF, arch eagle3 (--target-gguf); llama-server -md --spec-type draft-eagle3",
    "nemo": "NVIDIA NeMo Automodel LlamaEagle3DraftModel training output; read only",
    "dflash": "z-lab / SpecForge DFlashDraftModel, DSparkDraftModel (block diffusion); vLLM, SGLang",
}
LAYOUTS = tuple(LAYOUT_SUMMARIES)

# The serving engines, each with the runners whose reading of a file engines/ replays (vLLM's V1 and V2
# runners read capture ids differently, so each has a reader of its own).
ENGINE_RUNNERS = {"speculators": ("speculators",), "vllm": ("vllm-v1", "vllm-v2"), "sglang": ("sglang",),
                  "trtllm": ("trtllm",), "llamacpp": ("llamacpp",), "mlx-vlm": ("mlx-vlm",), "lmdeploy": ("lmdeploy",)}
ENGINES = tuple(ENGINE_RUNNERS)
# Readers judged only when named (--engine): no layout is written for them, so convert does not list them unasked.
NAMED_ONLY = ("mlx-vlm", "lmdeploy")
RUNNERS = tuple(runner for engine, runners in ENGINE_RUNNERS.items() if engine not in NAMED_ONLY for runner in runners)
LABELS = {"speculators": "speculators library", "vllm-v1": "vLLM (V1 runner)", "vllm-v2": "vLLM (V2 runner)",
          "sglang": "SGLang", "trtllm": "TensorRT-LLM (from source)", "llamacpp": "llama.cpp",
          "mlx-vlm": "mlx-vlm (from source)", "lmdeploy": "LMDeploy (from source)"}
# What every --engine option accepts: an engine, or one runner of it.
ENGINE_SPELLINGS = tuple(dict.fromkeys(name for engine, runners in ENGINE_RUNNERS.items()
                                       for name in (engine, *runners)))


def engine_of(spelling: str) -> str:
    """The engine a spelling names: `vllm-v1` -> `vllm`."""
    return next((engine for engine, runners in ENGINE_RUNNERS.items() if spelling in runners), spelling)


def runners_of(spelling: str) -> tuple[str, ...]:
    """The runners a spelling names: `vllm` -> both of vLLM's, `vllm-v1` -> that one."""
    return ENGINE_RUNNERS.get(spelling, (spelling,))


# Capture-id conventions (docs/formats.md §4): who reads ids as boundaries (x = b) and who as block outputs
# (x = b - 1). Trainers (specforge) count here too: --convention names whoever wrote the ids.
BOUNDARY_CONVENTIONS = ("speculators", "vllm", "eagle")
BLOCK_OUTPUT_CONVENTIONS = ("sglang", "specforge", "modelopt", "trtllm")
CONVENTIONS = BOUNDARY_CONVENTIONS + BLOCK_OUTPUT_CONVENTIONS
BOUNDARY = "boundary"  # --convention boundary: the ids are the canonical boundaries themselves
CAPTURE_CONVENTIONS = (BOUNDARY, *CONVENTIONS)
