"""What `eagle3-convert verify` costs (issues 24, 36): its speculative decoding against plain greedy generation of the
same tokens by the same target, in the same process, one after the other.

    python benchmarks/verify.py --size fixture                       # the trained fixture: 8 prompts × 64, k=3
    python benchmarks/verify.py --size 8b --layers 8 --prompts 2 --max-new-tokens 16 [--agree]
    python benchmarks/verify.py --size 8b --layers 32 --device cuda --prompts 8 --max-new-tokens 64   # on a GPU

Sizes: `fixture` is tests/data/verify-tiny (a trained target and drafter: mean accepted length 3.4 at k=3); the
others are benchmarks/cases.py's widths, the target built here with random bf16 weights (transformers
LlamaForCausalLM; `--layers` keeps fewer blocks than the size's where memory or time demand) and a tokenizer of one
character a token, the drafter cases.py's (speculators layout, random bf16 weights). Random weights accept nothing
(mean accepted length 1); `--agree` zeroes both heads and maps draft id 0 to target id 0, so that the target's
greedy text is token 0 and every draft is accepted (k+1): the arithmetic is all there, the text is degenerate.

Timed, after the target is loaded: `greedy`, the target generating the prompts' tokens one forward a token through
its KV cache (no hooks, no drafter); `verify`, verify's decoding (target.decode: the drafter drafting k tokens a round
and the target checking them in one forward, every boundary's state kept), with the drafter's part timed apart. Both
make the same tokens (checked). The goal (issue 36): verify ≤ 1.2 × greedy / mean accepted length, which needs a
forward over k+1 positions to cost about what a one-token forward costs: the table says what it cost (the target's
time in verify a forward, over greedy's a forward; the prompts' forwards are in both).
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import string
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import REPO, SIZES, Size, generate  # noqa: E402

sys.path.insert(0, str(REPO))
FIXTURE = REPO / "tests" / "data" / "verify-tiny"
PROMPTS = ["The quick brown fox jumps over the lazy dog. Then the dog", "def fibonacci(n):\n    ",
           "The capital of France is Paris. The capital of Germany is", "Question: what is 12 times 7? Answer:",
           "Once upon a time, in a small village by the sea, there lived", "To install the package, run",
           "Here is a list of three fruits:\n1.", "The theory of relativity, proposed by Albert Einstein,"]
# a width between the toys and 8B, for the thread rule: 8 blocks of 16.8 M weights
SIZES = {**SIZES, "1k": replace(SIZES["8b"], name="1k", hidden=1024, heads=16, kv_heads=4, head_dim=64,
                                intermediate=4096, vocab=32000, draft_vocab=8000)}
HEADER = ("| target | threads | prompts × new tokens | k | greedy s | verify s | verify / greedy | mean accepted "
          "length | goal 1.2 / length | target forwards (verify / greedy) | a verify forward / a greedy forward | "
          "drafter's share of verify |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def write_target(size: Size, layers: int, dest: Path, agree: bool) -> None:
    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    config = LlamaConfig(vocab_size=size.vocab, hidden_size=size.hidden, intermediate_size=size.intermediate,
                         num_hidden_layers=layers, num_attention_heads=size.heads, num_key_value_heads=size.kv_heads,
                         head_dim=size.head_dim, rms_norm_eps=1e-5, max_position_embeddings=131072,
                         tie_word_embeddings=False, dtype="bfloat16", bos_token_id=None, eos_token_id=None,
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
            elif agree and name == "lm_head.weight":
                param.zero_()  # every logit 0: the greedy token is id 0, always
            else:
                param.normal_(0.0, 0.02, generator=gen)
    model.save_pretrained(dest)
    characters = [c for c in string.printable if not c.isspace() or c == " "]
    vocab = {"<unk>": 0, **{c: i + 1 for i, c in enumerate(characters)}}
    vocab.update({f"<filler{i}>": i for i in range(len(vocab), size.vocab)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(dest)


def agreeing(drafter: Path) -> None:
    """The drafter's head zeroed (it drafts id 0) and draft id 0 mapped to target id 0."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(drafter / "model.safetensors")
    tensors["lm_head.weight"].zero_()
    first = int(tensors["d2t"][0])  # draft 0 was target `first`; now it is target 0
    tensors["d2t"][0] = 0
    tensors["t2d"][first], tensors["t2d"][0] = False, True
    save_file(tensors, drafter / "model.safetensors", metadata={"format": "pt"})


def greedy(loaded, prompt: str, max_new_tokens: int):
    """Plain greedy generation: the prompt's forward, then one forward a token through the KV cache."""
    import torch

    from eagle3_convert.verify.target import end_of_text, tokenize

    with torch.no_grad():
        ids, eos = tokenize(loaded, prompt), end_of_text(loaded)
        out = loaded.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        tokens = [int(out.logits[0, -1].argmax())]
        while len(tokens) < max_new_tokens and tokens[-1] not in eos:
            out = loaded.model(input_ids=torch.tensor([[tokens[-1]]], device=loaded.device),
                               past_key_values=out.past_key_values, use_cache=True)
            tokens.append(int(out.logits[0, -1].argmax()))
    return ids[0].tolist() + tokens, len(tokens)  # forwards: one a token


def measure(args: argparse.Namespace, drafter: Path, target: Path, prompts: list[str]) -> str:
    import torch

    from eagle3_convert.verify import Measured, acceptance, bind, target as target_mod
    from eagle3_convert.verify.rounds import Drafting
    from eagle3_convert.verify_inputs import check_inputs, default_threads

    inputs = check_inputs(drafter, target, prompts, k=args.k, device=args.device)
    threads = args.threads or default_threads(inputs)
    if threads:
        torch.set_num_threads(threads)
    loaded = target_mod.load_target_model(inputs)
    maths, embed = bind(inputs.source.drafter, loaded)
    greedy_s, verify_s, drafting_s = [], [], []
    for _ in range(args.repeats):  # alternated, so that a change in the machine's load touches both alike
        began = time.perf_counter()
        plain = [greedy(loaded, prompt, args.max_new_tokens) for prompt in prompts]
        greedy_s.append(time.perf_counter() - began)
        began = time.perf_counter()
        runs = [target_mod.decode(loaded, Drafting(maths, inputs.boundaries, embed), prompt, args.k,
                                  args.max_new_tokens) for prompt in prompts]
        verify_s.append(time.perf_counter() - began)
        drafting_s.append(sum(run.drafting_seconds for run in runs))
        if [run.tokens.tolist() for run in runs] != [tokens for tokens, _ in plain]:
            raise SystemExit("verify's text is not the greedy text: the comparison would be of different work")
    measured = Measured(inputs.source, loaded, runs, "", args.max_new_tokens, embed, maths, (args.k, inputs.boundaries))
    length = acceptance(measured, args.k).mean_accepted_length
    g, v, d = statistics.median(greedy_s), statistics.median(verify_s), statistics.median(drafting_s)
    forwards, plain_forwards = sum(run.forwards for run in runs), sum(n for _, n in plain)
    name = (f"{args.size}-shaped, {args.layers}/{SIZES[args.size].target_layers} layers" if args.size != "fixture"
            else "verify-tiny (trained)") + (", --agree" if args.agree else "")
    return (f"| {name} | {torch.get_num_threads()} | {len(prompts)} × {args.max_new_tokens} | {args.k} | {g:.2f} | "
            f"{v:.2f} | {v / g:.2f} | {length:.2f} | {1.2 / length:.2f} | "
            f"{forwards} / {plain_forwards} | {(v - d) / forwards / (g / plain_forwards):.2f} | {d / v:.0%} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("fixture", *SIZES), default="fixture")
    parser.add_argument("--layers", type=int, help="target blocks kept (default: the size's; at least 8)")
    parser.add_argument("--prompts", type=int, default=8, help="prompts (of the 8 built in here, or the fixture's)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--agree", action="store_true", help="both heads zeroed: every draft accepted (not fixture)")
    parser.add_argument("--threads", type=int, help="torch threads (default: verify's rule)")
    parser.add_argument("--repeats", type=int, default=1, help="greedy and verify each this many times: the median")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--work", type=Path, help="where the target and drafter are written (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) what --work holds")
    parser.add_argument("--out", default="-", help="append the row to this markdown file (-: stdout only)")
    args = parser.parse_args()
    if args.size == "fixture":
        if args.agree:
            parser.error("--agree builds its own target: give a size from benchmarks/cases.py")
        prompts = [p for p in (FIXTURE / "prompts.txt").read_text().splitlines() if p.strip()][: args.prompts]
        row = measure(args, FIXTURE / "drafter", FIXTURE / "target", prompts)
        work = None
    else:
        args.layers = args.layers or SIZES[args.size].target_layers
        if args.layers < 8:
            parser.error("--layers: at least 8 (the default capture boundaries 2, L//2, L-3 must differ)")
        size = replace(SIZES[args.size], target_layers=args.layers)
        work = args.work or Path(tempfile.mkdtemp(prefix="eagle3-verify-bench-"))
        target, drafter = work / "target", work / "drafter"
        try:
            if not (args.keep and (target / "config.json").is_file()):
                write_target(size, args.layers, target, args.agree)
            if not (args.keep and (drafter / "config.json").is_file()):
                generate(size, drafter)
                if args.agree:
                    agreeing(drafter)
            row = measure(args, drafter, target, PROMPTS[: args.prompts])
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    print(HEADER + "\n" + row)
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; command: python benchmarks/verify.py "
          f"{' '.join(sys.argv[1:])}")
    if args.out != "-":
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(row + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
