"""NeMo Automodel's `.pt` training output: `draft_model.pt` beside `eagle_meta.pt` (legacy `eagle3_meta.pt`), whose
`selected_token_ids` are the draft vocabulary; the weights held no `d2t` / `t2d` before NVIDIA-NeMo/Automodel #2447.

Facts (NVIDIA-NeMo/Automodel):
- `recipes/llm/train_eagle3.py` `_save_checkpoint` (first version): `torch.save(draft_model.state_dict(),
  "draft_model.pt")`, `config.save_pretrained(...)` and `torch.save({"selected_token_ids", "selected_token_mask",
  "global_step"}, "eagle3_meta.pt")`; later `_save_extra_state` writes `eagle_meta.pt` with `epoch` too, the
  consolidated weights going to a `model/` folder below it (#2374: `eagle3_meta.pt` is the legacy name its loader
  still falls back to).
- `components/datasets/llm/eagle3.py` `build_eagle3_token_mapping`: the ids are the special tokens, then the most
  frequent supervised ones, in that order (not sorted); `selected_token_mask[ids] = True`.
- `components/speculative/eagle/core.py` `_compute_target_distribution`: head row i is trained on target token
  `selected_token_ids[i]` (`target_logits.index_select(-1, selected_token_ids)`).
- #2447: with no map in the weights "vLLM ... silently aligned draft ids to the first draft_vocab_size target ids".

So the map is rebuilt from the ids, d2t[i] = id - i, in the ascending order every other layout keeps (FORMATS §3):
the rows of lm_head are put in that order with them (bytes moved whole, each row keeping its token). The meta's
pickle is read like a `.bin`: no code runs (torch_zip).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..safetensors_io import INT_DTYPES, InMemoryTensor, TensorSource, read_tensor_bytes
from ..vocab_map import decode_ints, decode_mask, encode_d2t, encode_t2d

WEIGHTS_NAME = "draft_model.pt"
META_NAMES = ("eagle_meta.pt", "eagle3_meta.pt")  # the recipe's name, then the legacy one (#2374)
ARCHITECTURE = "LlamaEagle3DraftModel"
HEAD = "lm_head.weight"


def meta_file(root: Path) -> Path | None:
    """The meta file beside the weights, or one level up from the consolidated `model/` folder (#2374)."""
    for folder in (root, root.parent) if root.name == "model" else (root,):
        for name in META_NAMES:
            if (folder / name).is_file():
                return folder / name
    return None


def applies(config: dict[str, Any], files: list[str]) -> bool:
    archs = config.get("architectures")
    return files == [WEIGHTS_NAME] or (isinstance(archs, list) and ARCHITECTURE in archs)


def with_selected_vocab(root: Path, config: dict[str, Any], tensors: dict[str, TensorSource], files: list[str],
                        notes: list[str]) -> dict[str, TensorSource]:
    """`tensors` with d2t/t2d rebuilt from the meta's selected_token_ids (and lm_head in their order) when the
    weights have no map of their own; the same dict when they have one or need none."""
    if not applies(config, files) or "d2t" in tensors or "t2d" in tensors:
        return tensors
    vocab, vd = config.get("vocab_size"), config.get("draft_vocab_size")
    if not isinstance(vocab, int) or not isinstance(vd, int) or isinstance(vd, bool):
        return tensors  # the reader refuses these fields itself
    meta = meta_file(root)
    if meta is None:
        return tensors  # Checkpoint.vocab_map refuses a reduced vocabulary without a map, in missing_map's words
    from ..torch_zip import read_state_dict  # (the header path never imports the pickle reader)

    shown = meta.name if meta.parent == root else f"../{meta.name}"
    ids = _selected_ids(read_state_dict(meta, shown, scalars=True), shown, vocab, vd)
    order = sorted(range(vd), key=ids.__getitem__)
    out = dict(tensors)
    moved = order != list(range(vd))
    if moved:
        out[HEAD] = _rows_in_order(tensors.get(HEAD), order, vd)
    sorted_ids = [ids[i] for i in order]
    if sorted_ids != list(range(vocab)):
        out["d2t"] = encode_d2t([t - i for i, t in enumerate(sorted_ids)])
        out["t2d"] = encode_t2d(sorted_ids, vocab)
        notes.append(f"rebuilt d2t/t2d from {shown}'s selected_token_ids ({vd} target ids), as NeMo Automodel "
                     "trained them (head row i predicts selected_token_ids[i])")
    if moved:
        notes.append("lm_head's rows put in ascending target-id order with the map (NeMo keeps them in the order "
                     "it selected the ids; each row keeps its token)")
    return out


def missing_map(config: dict[str, Any], files: list[str], exc: FormatError) -> FormatError:
    """E-VOCAB-MISSING as said of a NeMo Automodel output: where its map is kept (`exc` as it is otherwise)."""
    if exc.code != "E-VOCAB-MISSING" or not applies(config, files):
        return exc
    return FormatError(f"{exc.message} (NeMo Automodel before #2447 kept it in {META_NAMES[0]}, legacy "
                       f"{META_NAMES[1]}, and neither is beside the weights)",
                       f"copy {META_NAMES[0]} (or {META_NAMES[1]}) from the training run's checkpoint folder beside "
                       f"{', '.join(files)}: its selected_token_ids are the draft vocabulary", code=exc.code)


def _selected_ids(meta: dict[str, TensorSource], shown: str, vocab: int, vd: int) -> list[int]:
    src = meta.get("selected_token_ids")
    if src is None:
        raise FormatError(f"{shown} holds no selected_token_ids", "copy the meta file of the same training run "
                          "(NeMo Automodel's EAGLE-3 recipe writes selected_token_ids into it)",
                          code="E-VOCAB-MISSING")
    if src.dtype not in INT_DTYPES or len(src.shape) != 1 or src.shape[0] != vd:
        raise FormatError(f"{shown}: selected_token_ids is {src.dtype} of shape {list(src.shape)}, expected "
                          f"integer ids of shape [{vd}] (draft_vocab_size)",
                          "config.json and the meta file come from different runs: copy the pair of one run",
                          code="E-VOCAB-SHAPE")
    ids = decode_ints(src)
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise FormatError(f"{shown}: selected_token_ids holds {len(bad)} id(s) outside [0, {vocab}), e.g. {bad[0]}",
                          "the meta file is not this target's: copy the one of this training run",
                          code="E-VOCAB-RANGE")
    if len(set(ids)) != vd:
        raise FormatError(f"{shown}: selected_token_ids repeats target ids ({vd - len(set(ids))} repeated)",
                          "the meta file is damaged: copy it again from the training run", code="E-VOCAB-ORDER")
    mask = meta.get("selected_token_mask")
    if mask is not None:
        marked = decode_mask(mask) if len(mask.shape) == 1 and mask.shape[0] == vocab else None
        if marked is None or [i for i, b in enumerate(marked) if b] != sorted(ids):
            raise FormatError(f"{shown}: selected_token_mask does not mark exactly the selected_token_ids",
                              "the meta file is inconsistent: copy it again from the training run",
                              code="E-VOCAB-MISMATCH")
    return ids


def _rows_in_order(head: TensorSource | None, order: list[int], vd: int) -> InMemoryTensor:
    """lm_head with row j = the stored row order[j]: bytes moved whole, no value decoded."""
    if head is None or len(head.shape) != 2 or head.shape[0] != vd:
        raise FormatError(f"{HEAD} is {'missing' if head is None else f'of shape {list(head.shape)}'}; the draft "
                          f"head must have draft_vocab_size ({vd}) rows to follow selected_token_ids",
                          "the weights and config.json come from different runs: copy the pair of one run",
                          code="E-VOCAB-SHAPE")
    data = read_tensor_bytes(head)
    row = len(data) // vd
    return InMemoryTensor(head.dtype, tuple(head.shape), b"".join(data[r * row:(r + 1) * row] for r in order))
