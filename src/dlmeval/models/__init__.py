"""Models layer: every family's quirks stay here (see docs/architecture.md)."""

from dlmeval.models.base import DiffusionLM, ForwardOut, ModelIdentity, PositionScores, length_sorted_batches
from dlmeval.models.causal import CausalLM
from dlmeval.models.family import FAMILIES, Family
from dlmeval.models.registry import load_causal_lm, load_diffusion
from dlmeval.models.tiny import tiny_model

__all__ = [
    "DiffusionLM",
    "CausalLM",
    "ForwardOut",
    "ModelIdentity",
    "PositionScores",
    "FAMILIES",
    "Family",
    "length_sorted_batches",
    "load_causal_lm",
    "load_diffusion",
    "tiny_model",
]
