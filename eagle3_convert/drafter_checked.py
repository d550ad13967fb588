"""The pydantic twins of `drafter.TargetIdentity` and `drafter.DrafterConfig`: the reference they are checked by.

Imported only when a value is not one the plain models take as given (eagle3_convert/plainmodel.py): then
these validate, coerce or raise pydantic's ValidationError, exactly as the models did when they were these
classes. Same names (a ValidationError's first line names the class), same fields, same order.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .drafter import MLA_KEYS

Family = Literal["llama", "qwen3", "deepseek_mla"]


class TargetIdentity(BaseModel):
    """The target (verifier) model the drafter proposes tokens for."""

    model_config = ConfigDict(extra="forbid")

    name_or_path: str | None = None
    architectures: list[str] = Field(default_factory=list)
    revision: str | None = None
    model_type: str | None = None
    num_hidden_layers: int | None = None
    hidden_size: int | None = None
    vocab_size: int | None = None


class DrafterConfig(BaseModel):
    """Canonical drafter configuration; capture layers as boundaries (docs/formats.md §4)."""

    model_config = ConfigDict(extra="forbid")

    family: Family = "llama"
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int | None = Field(default=None, gt=0)
    num_layers: int = Field(default=1, ge=1)
    rms_norm_eps: float = 1e-5
    hidden_act: str = "silu"
    max_position_embeddings: int | None = None
    rope: dict[str, Any] = Field(default_factory=dict, description="rope fields, verbatim as the source spelled them")
    mla: dict[str, int] | None = None

    vocab_size: int = Field(gt=0, description="target vocab V")
    draft_vocab_size: int = Field(gt=0, description="draft vocab Vd")
    target_hidden_size: int | None = Field(default=None, description="Ht; None when equal to hidden_size")
    num_aux_hidden_states: int = Field(default=3, ge=1, description="k, the number of captured target states")
    capture_boundaries: list[int] | None = Field(default=None, description="None: the engine default {2, L//2, L-3}")

    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    # ModelOpt's HF trainer runs input_layernorm over h before hidden_norm in the first layer:
    # hidden_norm(input_layernorm(h)) where every engine computes hidden_norm(h).
    input_layernorm_on_hidden: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False

    target: TargetIdentity | None = None
    hf_extra: dict[str, Any] = Field(default_factory=dict, description="decoder-config keys carried verbatim")
    top_extra: dict[str, Any] = Field(default_factory=dict, description="top-level keys every layout keeps (dtype)")
    layout_extra: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="keys only one layout has, re-emitted when writing that layout")

    @model_validator(mode="after")
    def _mla_widths_stated(self) -> "DrafterConfig":
        if self.family == "deepseek_mla" and not (self.mla and all(k in self.mla for k in MLA_KEYS)):
            raise ValueError(f"an MLA drafter needs every latent width: {', '.join(MLA_KEYS)}")
        return self
