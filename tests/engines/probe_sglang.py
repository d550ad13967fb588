"""SGLang 0.5.23 on CPU: config parsing, model registry, model __init__, load_weights, capture ids, forward.

    python probe_sglang.py JOBS.json OUT_DIR

Each job: {"id", "draft", "target", "inputs"} (see probe_vllm.py). Per job it reports:
  stage/error      the step of SGLang's own path that raised, and SGLang's own message
  architecture     the class SGLang's registry resolved the draft's `architectures` to
  capture_ids      {"sglang": the ids resolve_spec_aux_hidden_state_config hands the target}
  layers_to_capture  what the target class's own set_eagle3_layers_to_capture made of them
  params           a safetensors file of every parameter after load_weights, plus hot_token_id
  forward          the drafter's outputs on the states the target captures, or SGLang's error; with
                   fed_embeds (see _engine.fed_back) also its logits and the fed-back step's outputs

The engine path is SGLang's own: ServerArgs published through runtime_context.publish (world
size 1), init_distributed_environment + initialize_model_parallel on gloo, ModelConfig (the
draft's config parsing), get_model (registry, the model's __init__, its load_weights), and
model_runner_components.spec_aux_hidden_state.resolve_spec_aux_hidden_state_config (where the
target's capture ids come from). Stand-ins, for the forward only: causal SDPA in place of
RadixAttention (the paged attention op), forward_native for SGLang's fused ops, and a forward
batch that carries only what the drafter's forward reads (spec_info.hidden_states, the mode).
On every CPU: SGLang is told the CPU has no AMX, as vLLM is (tests/engines/_engine.py).
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import _engine
import torch

DTYPE = "float32"  # bf16 checkpoints are upcast exactly; the forward runs in full precision


def server_args(target: str, draft: str):
    from sglang.srt.server_args import ServerArgs

    return ServerArgs(model_path=target, device="cpu", speculative_algorithm="EAGLE3",
                      speculative_draft_model_path=draft, skip_tokenizer_init=True, dtype=DTYPE)


def publish(target: str, draft: str):
    args = server_args(target, draft)
    try:
        from sglang.srt.runtime_context import SpawnRanks, publish
    except ImportError:  # releases before runtime_context (0.5.11 and older): the scheduler's global server args
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(args)
        return args
    publish(args, role="scheduler", ranks=SpawnRanks(world_rank=0))
    return args


def capture_ids(args, target, draft_path: str):
    """(the ids SGLang hands the target's set_eagle3_layers_to_capture, whether it captures at all: the draft's
    eagle_config.use_aux_hidden_state), by the release's own code where it has a function for it
    (resolve_spec_aux_hidden_state_config); releases before it (0.5.9-0.5.11) read them inline in
    ModelRunner.__init__ (model_runner.py): the draft config's nested eagle_config, as replayed here."""
    try:
        from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
            resolve_spec_aux_hidden_state_config)
    except ImportError:
        from sglang.srt.configs.model_config import ModelConfig

        draft = ModelConfig.from_server_args(args, model_path=draft_path, is_draft_model=True)
        eagle = getattr(draft.hf_config, "eagle_config", None)
        use_aux = eagle.get("use_aux_hidden_state", True) if isinstance(eagle, dict) else True
        try:
            return eagle["eagle_aux_hidden_state_layer_ids"], use_aux
        except Exception:  # noqa: BLE001  (their bare except: no nested list means the defaults)
            return None, use_aux
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    aux = resolve_spec_aux_hidden_state_config(server_args=args, model_config=target,
                                               spec_algorithm=SpeculativeAlgorithm.EAGLE3, is_draft_worker=False)
    return aux.eagle_aux_hidden_state_layer_ids, aux.eagle_use_aux_hidden_state


class SDPAAttention(torch.nn.Module):
    def __init__(self, original: torch.nn.Module) -> None:
        super().__init__()
        self.original = [original]  # not a submodule: its parameters are not ours
        self.num_heads, self.num_kv_heads = original.tp_q_head_num, original.tp_k_head_num
        self.head_dim, self.v_head_dim, self.scale = original.head_dim, original.v_head_dim, original.scaling

    def forward(self, q, k, v, *args, **kwargs):
        return _engine.causal_sdpa(q, k, v, self.num_heads, self.num_kv_heads, self.head_dim, self.v_head_dim,
                                   self.scale)


def prepare_forward(model: torch.nn.Module) -> None:
    from sglang.srt.layers.radix_attention import RadixAttention

    try:
        from sglang.kernels.fused_op import BaseFusedOp
    except ImportError:  # older releases call their ops' native paths on CPU themselves
        BaseFusedOp = ()
    for module in list(model.modules()):
        if BaseFusedOp and isinstance(module, BaseFusedOp):
            module._forward_method = module.forward_native
        for name, child in list(module.named_children()):
            if isinstance(child, RadixAttention):
                setattr(module, name, SDPAAttention(child))


def fuse(inner: torch.nn.Module, captured: torch.Tensor) -> torch.Tensor:
    """The fused state SGLang's LlamaModel.forward makes of captured states wider than H (llama_eagle3.py), by its own
    modules: the fed-back step mixes those rows with the H-wide state handed on, which it would not fuse."""
    if inner.input_norm is not None:
        captured = inner.input_norm(captured)
    if inner.fc_norm is not None:
        chunks = captured.chunk(inner.num_aux_hidden_states, dim=-1)
        captured = torch.cat([norm(chunk) for norm, chunk in zip(inner.fc_norm, chunks)], dim=-1)
    return inner.fc(captured)


def draft_logits(model: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """Allowed stand-in for the LogitsProcessor (it needs a whole forward batch): their lm_head's weight applied to
    the hidden; the drafted token is hot_token_id[argmax], as SGLang maps it."""
    return hidden @ model.lm_head.weight.T


def forward_batch(hidden: torch.Tensor):
    """Only what the EAGLE-3 drafter's LlamaModel.forward reads when given input_embeds."""
    mode = SimpleNamespace(is_extend=lambda: True, is_draft_extend_v2=lambda: False, is_decode=lambda: False,
                           is_idle=lambda: False)
    return SimpleNamespace(spec_info=SimpleNamespace(hidden_states=hidden), forward_mode=mode,
                           mm_input_embeds=None, contains_mm_inputs=lambda: False)


def run(job: dict, stage: _engine.Stage, out_dir: str) -> dict:
    from sglang.srt.configs.device_config import DeviceConfig
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_loader import get_model
    from sglang.srt.model_loader.utils import get_model_architecture

    report: dict = {}
    stage("server args")
    args = publish(job["target"], job["draft"])
    stage("target config")
    target = ModelConfig.from_server_args(args, model_path=job["target"])
    num_layers = target.hf_config.num_hidden_layers
    target_cls, _ = get_model_architecture(target)
    stage("capture ids (resolve_spec_aux_hidden_state_config)")
    ids, use_aux = capture_ids(args, target, job["draft"])
    report["capture_ids"] = {"sglang": list(ids) if ids is not None else None}
    report["feeds"] = {"sglang": "aux" if use_aux else "final"}
    stand_in = SimpleNamespace(pp_group=SimpleNamespace(is_last_rank=True),
                               config=SimpleNamespace(num_hidden_layers=num_layers), model=SimpleNamespace())
    if use_aux:  # else the target captures nothing (model_runner.py 0.5.11, attention_backend_setup.py 0.5.23)
        target_cls.set_eagle3_layers_to_capture(stand_in, ids)
    report["layers_to_capture"] = list(getattr(stand_in.model, "layers_to_capture", []))
    report["target_class"] = target_cls.__name__
    stage("draft config (ModelConfig)")
    draft = ModelConfig.from_server_args(args, model_path=job["draft"], is_draft_model=True)
    report["config_architectures"] = list(draft.hf_config.architectures or [])
    stage("model registry")
    draft_cls, arch = get_model_architecture(draft)
    report["architecture"] = arch
    report["class"] = f"{draft_cls.__module__}.{draft_cls.__name__}"
    stage("model __init__ + load_weights (get_model)")
    model = get_model(model_config=draft, load_config=LoadConfig(), device_config=DeviceConfig("cpu"))
    params = dict(model.named_parameters())
    if getattr(model, "hot_token_id", None) is not None:
        params["hot_token_id"] = model.hot_token_id
    report["params"] = _engine.save(os.path.join(out_dir, f"{job['id']}.sglang.params.safetensors"), params)
    report["applied"] = _engine.applied_flags(model)
    report["forward"] = {}
    # the target (llama.py / deepseek_v2.py LlamaModel / DeepseekV2Model.forward) hands block i
    # the capture hook when i is in layers_to_capture, for i in range(num_layers): it captures
    # boundary i, the input of block i; a boundary L (after the last block) is never captured
    captured = sorted({b for b in report["layers_to_capture"] if 0 <= b < num_layers})
    if job.get("inputs") and "Deepseek" in draft_cls.__name__:
        # DeepseekV2AttentionMLA picks its forward from the attention backend; on a CPU without AMX
        # SGLang falls back to torch_native, which deepseek_common/attention_backend_handler.py has no
        # handler for: no forward of theirs to run (see MLA_FORWARD_MISSING in tests/test_engines.py)
        report["forward"]["sglang"] = {"captured": captured, "skipped": "MLA"}
    elif job.get("inputs"):
        stage("forward")
        inputs = _engine.load_inputs(job["inputs"])
        result: dict = {"captured": captured, "fed": report["feeds"]["sglang"]}
        try:
            prepare_forward(model)
            with torch.no_grad():
                # use_aux_hidden_state false: the logits processor's hidden_states, the target's post-norm output
                hidden = inputs["final"] if not use_aux else _engine.captured_input(inputs["states"], captured)
                out, aux_out = model.model(inputs["input_ids"], inputs["positions"], forward_batch(hidden),
                                           input_embeds=inputs["embeds"])
                outputs = {"hidden": out, "aux": aux_out[0]}
                if "fed_embeds" in inputs:
                    outputs["logits"] = draft_logits(model, out)
                    fed = _engine.fed_back(inputs, fuse(model.model, hidden), aux_out[0])
                    out, aux_out = model.model(fed["input_ids"], fed["positions"], forward_batch(fed["hidden"]),
                                               input_embeds=fed["embeds"])
                    outputs.update(hidden_fed=out[-1:], aux_fed=aux_out[0][-1:],
                                   logits_fed=draft_logits(model, out[-1:]))
            result["outputs"] = _engine.save(os.path.join(out_dir, f"{job['id']}.sglang.forward.safetensors"),
                                             outputs)
        except Exception as exc:  # noqa: BLE001
            result["error"] = _engine.engine_error(exc)
        report["forward"]["sglang"] = result
    return report


def main(jobs_file: str, out_dir: str) -> None:
    import json

    from sglang.srt.distributed import init_distributed_environment, initialize_model_parallel

    first = json.loads(open(jobs_file).read())[0]
    publish(first["target"], first["target"])  # world-size-1 placement; each job publishes its own pair
    init_distributed_environment(backend="gloo", world_size=1, rank=0, local_rank=0,
                                 distributed_init_method=f"tcp://127.0.0.1:{_engine.free_port()}")
    initialize_model_parallel(backend="gloo")
    _engine.run_jobs(jobs_file, lambda job, stage: run(job, stage, out_dir),
                     {"versions": _engine.versions("sglang", "transformers", "torch"), "cpu": _engine.cpu_isa()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
