"""vLLM 0.33.0 on CPU: config parsing, model registry, model __init__, load_weights, capture ids, forward.

    python probe_vllm.py JOBS.json OUT_DIR

Each job: {"id", "draft", "target", "inputs"} (inputs: a safetensors file with input_ids,
positions, embeds [T, H] and states [L+1, T, Ht], the fake target hidden state at every
capture boundary; optionally fed_embeds [1, H], see _engine.fed_back). Per job it reports:
  stage/error      the step of vLLM's own path that raised, and vLLM's own message
  architecture     the class vLLM's registry resolved the draft's `architectures` to
  capture_ids      {"vllm-v1": GPUModelRunner._get_eagle3_aux_layers_from_config,
                    "vllm-v2": spec_decode/eagle/eagle3_utils.get_eagle3_aux_layers_from_config}
                   (None: the runner falls back to the target's defaults, also reported)
  params           a safetensors file of every parameter after load_weights
  forward          per runner, the drafter's outputs on the states that runner captures, or the
                   error vLLM raised on them; with fed_embeds also its logits (compute_logits) and the
                   fed-back step's outputs and logits
  shortcut         `vllm serve DRAFTER`'s own reading of the draft (maybe_override_with_speculators, what
                   engine/arg_utils.py applies to --model): {"ok"} or {"error"}; the rest of the report is the
                   --speculative-config way, which never reads the speculators verifier

The engine path is vLLM's own: ModelConfig / SpeculativeConfig (which parse the draft config,
speculators format included, and check the verifier), VllmConfig, init_distributed_environment
and ensure_model_parallel_initialized (world size 1, gloo), get_model (the registry, the
model's __init__ and its load_weights). Stand-ins, for the forward only: causal SDPA in place
of the paged attention op, and forward_native for vLLM's custom ops (their CPU kernels live in
vllm._C, which the CUDA wheel does not ship for CPU). On every CPU: vLLM is told the CPU has no
AMX, so that it takes its plain torch path instead of kernels the wheel lacks (tests/engines/_engine.py).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # the CUDA wheel picks its CPU platform only when told

import _engine  # noqa: E402  (offline env, empty_cache stand-in)
import torch  # noqa: E402

_stdout, sys.stdout = sys.stdout, sys.stderr  # vLLM's log handler binds the stdout of its first import (0.24.0):
import vllm.platforms as _platforms  # noqa: E402  (stdout carries the one JSON report only)

sys.stdout = _stdout

if _platforms.cpu_platform_plugin() is None:
    # Allowed stand-in for releases that read no VLLM_TARGET_DEVICE (0.24.0 picks its CPU platform only for a CPU
    # build, one whose version says "cpu"): the CPU platform class the newer releases pick when told.
    from vllm.platforms.cpu import CpuPlatform

    _platforms._current_platform = CpuPlatform()

DTYPE = "float32"  # bf16 checkpoints are upcast exactly; the forward runs in full precision


def target_defaults(target_cls, num_layers: int) -> tuple[int, ...]:
    """The target class's own default capture layers (what a runner uses when the config has none)."""
    from types import SimpleNamespace

    stand_in = SimpleNamespace(model=SimpleNamespace(layers=[None] * num_layers),
                               config=SimpleNamespace(num_hidden_layers=num_layers))
    return tuple(target_cls.get_eagle3_default_aux_hidden_state_layers(stand_in))


class SDPAAttention(torch.nn.Module):
    def __init__(self, original: torch.nn.Module) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads = original.num_heads, original.num_kv_heads
        self.head_size = original.head_size
        self.scale = original.impl.scale

    def forward(self, q, k, v, *args, **kwargs):
        return _engine.causal_sdpa(q, k, v, self.num_heads, self.num_kv_heads, self.head_size, self.head_size,
                                   self.scale)


def prepare_forward(model: torch.nn.Module) -> None:
    from vllm.model_executor.custom_op import CustomOp
    from vllm.model_executor.layers.attention import Attention

    for module in list(model.modules()):
        if isinstance(module, CustomOp):
            module._forward_method = module.forward_native
        for name, child in list(module.named_children()):
            if isinstance(child, Attention):
                setattr(module, name, SDPAAttention(child))


def run(job: dict, stage: _engine.Stage, out_dir: str) -> dict:
    from types import SimpleNamespace

    from vllm.config import (DeviceConfig, LoadConfig, ModelConfig, ParallelConfig, SpeculativeConfig, VllmConfig,
                             set_current_vllm_config)
    from vllm.model_executor.model_loader import get_model
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    report: dict = {"shortcut": shortcut(job["draft"])}
    stage("target config")
    target = ModelConfig(model=job["target"], tokenizer=None, skip_tokenizer_init=True, dtype=DTYPE)
    num_layers = target.hf_config.num_hidden_layers
    target_cls, _ = ModelRegistry.resolve_model_cls(target.architectures, model_config=target)
    report["target_defaults"] = list(target_defaults(target_cls, num_layers))
    stage("draft config (SpeculativeConfig)")
    parallel = ParallelConfig()
    spec = SpeculativeConfig(model=job["draft"], method="eagle3", num_speculative_tokens=3,
                             target_model_config=target, target_parallel_config=parallel)
    draft = spec.draft_model_config
    report["config_architectures"] = list(draft.architectures)
    stage("capture ids")
    v1 = GPUModelRunner._get_eagle3_aux_layers_from_config(SimpleNamespace(speculative_config=spec))
    v2 = get_eagle3_aux_layers_from_config(spec)
    report["capture_ids"] = {"vllm-v1": list(v1) if v1 else None, "vllm-v2": list(v2) if v2 else None}
    report["feeds"] = feeds(spec, draft)
    stage("model registry")
    draft_cls, arch = ModelRegistry.resolve_model_cls(draft.architectures, model_config=draft)
    report["architecture"] = arch
    report["class"] = f"{draft_cls.__module__}.{draft_cls.__name__}"
    stage("model __init__ + load_weights (get_model)")
    config = VllmConfig(model_config=target, speculative_config=spec, parallel_config=parallel,
                        load_config=LoadConfig(), device_config=DeviceConfig("cpu"))
    with set_current_vllm_config(config):
        model = get_model(vllm_config=config, model_config=draft)
    report["class"] = f"{type(model).__module__}.{type(model).__name__}"
    params = dict(model.named_parameters())  # buffers (rotary caches, kv scales) are not checkpoint tensors
    report["params"] = _engine.save(os.path.join(out_dir, f"{job['id']}.vllm.params.safetensors"), params)
    report["applied"] = _engine.applied_flags(model)
    report["forward"] = {}
    if job.get("inputs"):
        stage("forward")
        inputs = _engine.load_inputs(job["inputs"])
        prepare_forward(model)
        for runner, ids in report["capture_ids"].items():
            layers = sorted(set(ids)) if ids else sorted(set(report["target_defaults"]))
            # the target captures boundary b (the input of block b; b = L after the last block) for
            # every b in the set: vllm/model_executor/models/interfaces.py EagleModelMixin; a runner that feeds
            # the final state captures nothing and hands over the model's output (its final norm applied)
            final = report["feeds"][runner] == "final"
            captured = [] if final else [b for b in layers if 0 <= b <= num_layers]
            result: dict = {"captured": captured, "fed": report["feeds"][runner]}
            if "Deepseek" in type(model).__name__:
                # MLA attention does its kv_b up-projection inside the paged op: no SDPA stand-in is theirs
                report["forward"][runner] = {**result, "skipped": "MLA"}
                continue
            try:
                with set_current_vllm_config(config), torch.no_grad():
                    fed = inputs["final"] if final else _engine.captured_input(inputs["states"], captured)
                    hidden = model.combine_hidden_states(fed)
                    out, aux = model(inputs["input_ids"], inputs["positions"], hidden, inputs["embeds"])
                    outputs = {"hidden": out, "aux": aux}
                    if "fed_embeds" in inputs:  # their compute_logits (draft logits scattered onto target ids)
                        outputs["logits"] = model.compute_logits(out)
                        fed = _engine.fed_back(inputs, hidden, aux)
                        out, aux = model(fed["input_ids"], fed["positions"], fed["hidden"], fed["embeds"])
                        outputs.update(hidden_fed=out[-1:], aux_fed=aux[-1:], logits_fed=model.compute_logits(out[-1:]))
                result["outputs"] = _engine.save(os.path.join(out_dir, f"{job['id']}.{runner}.forward.safetensors"),
                                                 outputs)
            except Exception as exc:  # noqa: BLE001
                result["error"] = _engine.engine_error(exc)
            report["forward"][runner] = result
    return report


def feeds(spec, draft) -> dict:
    """What each runner feeds the drafter, by vLLM's own functions: "aux" (the captured states, through
    combine_hidden_states) or "final" (the target's output, when eagle_config.use_aux_hidden_state is false)."""
    from types import SimpleNamespace

    try:
        from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
    except ImportError:  # releases that kept the method on the EAGLE proposer itself
        from vllm.v1.spec_decode.eagle import EagleProposer as SpecDecodeBaseProposer

    v1 = SpecDecodeBaseProposer._get_eagle3_use_aux_hidden_state_from_config(
        SimpleNamespace(method="eagle3", draft_model_config=draft))
    try:
        from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import requires_aux_hidden_states
    except ImportError:  # before 0.33.0 the V2 runner sets use_aux_hidden_state_outputs for every eagle3 config
        v2 = True
    else:
        v2 = requires_aux_hidden_states(spec)
    return {"vllm-v1": "aux" if v1 else "final", "vllm-v2": "aux" if v2 else "final"}


def shortcut(draft: str) -> dict:
    """What `vllm serve DRAFTER` makes of the draft before any model is built: the target it takes from a speculators
    config's verifier, or vLLM's refusal of it (run where the probe runs: vLLM checks the name as a path there)."""
    from vllm.transformers_utils.config import maybe_override_with_speculators

    try:
        model, _, _ = maybe_override_with_speculators(model=draft, tokenizer=None, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001  (vLLM's own refusal is the finding)
        return {"ok": False, "error": _engine.engine_error(exc)}
    return {"ok": True, "model": model}


def main(jobs_file: str, out_dir: str) -> None:
    from vllm.config import ParallelConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment

    with set_current_vllm_config(VllmConfig(parallel_config=ParallelConfig())):
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{_engine.free_port()}")
        ensure_model_parallel_initialized(1, 1)
    _engine.run_jobs(jobs_file, lambda job, stage: run(job, stage, out_dir),
                     {"versions": _engine.versions("vllm", "transformers", "torch"), "cpu": _engine.cpu_isa()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
