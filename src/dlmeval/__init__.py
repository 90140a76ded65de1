"""dlmeval: evaluation toolkit for masked diffusion language models."""

__version__ = "0.1.0"
