"""What `eagle3-convert verify` costs on a Llama-3.1-8B-shaped target (issue 24): wall time, peak RSS, tokens/s.

    python benchmarks/verify.py                                  # CPU, 8 of the target's 32 layers, 4 prompts
    python benchmarks/verify.py --layers 32 --device cuda --prompts 8 --max-new-tokens 64 --out -   # on a GPU

The target is built here with random bf16 weights (transformers LlamaForCausalLM with Llama-3.1-8B's widths:
H=4096, 32/8 heads of 128, I=14336, V=128256, llama3 rope) and a tokenizer of V tokens (one a character, the
rest filler); `--layers` keeps fewer than its 32 blocks where memory or time demand (the per-token cost scales
with them; the embedding and head, 1.05 B parameters, stay whole). The drafter is benchmarks/cases.py's `8b`
(speculators layout, Vd=32000, random bf16 weights) capturing the engine default boundaries of that depth. Random
weights accept nothing: the figures are the measurement's cost, not an acceptance. Timed: the whole command
(`verify --json --no-record`, in a fresh process: loading the target, generating, drafting), with its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import string
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import REPO, SIZES, generate  # noqa: E402

PROMPTS = ["The quick brown fox jumps over the lazy dog. Then the dog", "def fibonacci(n):\n    ",
           "The capital of France is Paris. The capital of Germany is", "Question: what is 12 times 7? Answer:",
           "Once upon a time, in a small village by the sea, there lived", "To install the package, run",
           "Here is a list of three fruits:\n1.", "The theory of relativity, proposed by Albert Einstein,"]


def write_target(size, layers: int, dest: Path) -> None:
    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    config = LlamaConfig(vocab_size=size.vocab, hidden_size=size.hidden, intermediate_size=size.intermediate,
                         num_hidden_layers=layers, num_attention_heads=size.heads, num_key_value_heads=size.kv_heads,
                         head_dim=size.head_dim, rms_norm_eps=1e-5, max_position_embeddings=131072,
                         tie_word_embeddings=False, dtype="bfloat16",
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 8192})
    with torch.device("meta"):  # no float32 copy of 8B-wide weights: allocated once, in bf16, then drawn in place
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model = model.to_empty(device="cpu")  # (rope's inv_freq is left unset: not saved, recomputed when loaded)
    gen = torch.Generator().manual_seed(2026)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02, generator=gen)
    model.save_pretrained(dest)
    characters = [c for c in string.printable if not c.isspace() or c == " "]
    vocab = {"<unk>": 0, **{c: i + 1 for i, c in enumerate(characters)}}
    vocab.update({f"<filler{i}>": i for i in range(len(vocab), size.vocab)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(dest)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("8b", "tiny"), default="8b", help="benchmarks/cases.py size (tiny: smoke)")
    parser.add_argument("--layers", type=int, default=8, help="target blocks kept (8B has 32; at least 8)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts (of the 8 built in here)")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--work", type=Path, help="where the target and drafter are written (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) what --work holds")
    parser.add_argument("--out", default="-", help="append the row to this markdown file (-: stdout only)")
    args = parser.parse_args()
    if args.layers < 8:
        parser.error("--layers: at least 8 (the default capture boundaries 2, L//2, L-3 must differ)")
    size = replace(SIZES[args.size], target_layers=args.layers)
    work = args.work or Path(tempfile.mkdtemp(prefix="eagle3-verify-bench-"))
    target, drafter, prompts = work / "target", work / "drafter", work / "prompts.txt"
    try:
        if not (args.keep and (target / "config.json").is_file()):
            write_target(size, args.layers, target)
        if not (args.keep and (drafter / "config.json").is_file()):
            generate(size, drafter)
        prompts.write_text("\n".join(json.dumps(p) for p in PROMPTS[: args.prompts]) + "\n")
        argv = [sys.executable, "-m", "eagle3_convert", "verify", str(drafter), "--target-model", str(target),
                "--prompts", str(prompts), "-k", str(args.k), "--device", args.device, "--max-new-tokens",
                str(args.max_new_tokens), "--json", "--no-record", "-q"]
        timed = ["/usr/bin/time", "-f", "%e %M", *argv] if shutil.which("/usr/bin/time") else argv
        done = subprocess.run(timed, capture_output=True, text=True, cwd=REPO)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        doc = json.loads(done.stdout)
        wall, rss_kib = (done.stderr.strip().splitlines()[-1].split() + ["?", "?"])[:2]
        row = (f"| {size.name}-shaped, {args.layers}/{SIZES[args.size].target_layers} layers | {args.device} | "
               f"{doc['prompts']} × {doc['max_new_tokens']} | {doc['k']} | {wall} | "
               f"{int(rss_kib) / 1024:.0f} | {doc['tokens']} | {doc['tokens_per_second']:.2f} | "
               f"{doc['mean_accepted_length']:.2f} |")
        header = ("| target | device | prompts × new tokens | k | wall s | peak RSS MiB | tokens | tokens/s | "
                  "mean accepted length |\n|---|---|---|---|---|---|---|---|---|")
        print(header + "\n" + row)
        print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; command: {' '.join(argv[2:])}")
        if args.out != "-":
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(row + "\n")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
