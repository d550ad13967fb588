import torch, json, os, sys, copy
from transformers import LlamaConfig, LlamaForCausalLM
import modelopt.torch.quantization as mtq
import modelopt.torch.speculative as mtsp
from modelopt.torch.speculative.config import EAGLE3_DEFAULT_CFG
from modelopt.torch.export import export_speculative_decoding
algo, out = sys.argv[1], sys.argv[2]
import modelopt.torch.speculative.plugins.modeling_eagle as me
_R = me.LlamaRotaryEmbedding
me.LlamaRotaryEmbedding = lambda config, device=None: _R(config=config)  # this transformers' signature has no device

torch.manual_seed(0)
cfg = LlamaConfig(architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128, num_attention_heads=4,
                  num_key_value_heads=2, num_hidden_layers=4, vocab_size=128, head_dim=16)
m = LlamaForCausalLM(cfg)
c = copy.deepcopy(EAGLE3_DEFAULT_CFG["config"])
c["eagle_architecture_config"].update({"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128, "draft_vocab_size": 128})
mtsp.convert(m, [("eagle", c)])
qcfg = copy.deepcopy({"FP8": mtq.FP8_DEFAULT_CFG, "NVFP4": mtq.NVFP4_DEFAULT_CFG}[algo])
# quantize only the drafter (quantize_drafter.py's way: the base stays as it is)
qcfg["quant_cfg"] = [*qcfg["quant_cfg"], {"quantizer_name": "*bmm_quantizer", "enable": False}] if isinstance(qcfg["quant_cfg"], list) else qcfg["quant_cfg"]
def fwd(model):
    model(torch.randint(0, 128, (1, 8)))
m.eval()
mtq.quantize(m, qcfg, fwd)
export_speculative_decoding(m, export_dir=out)
print(os.listdir(out))
from safetensors import safe_open
with safe_open(f"{out}/model.safetensors", "pt") as f:
    for k in sorted(f.keys()):
        t = f.get_tensor(k); print(k, t.dtype, tuple(t.shape))
print(open(f"{out}/config.json").read())
