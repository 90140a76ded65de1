"""dlmeval: evaluation toolkit for masked diffusion language models."""

# written by setuptools-scm when the package is built or installed (from git); a plain source tree (PYTHONPATH=src,
# no install) has none. The version recorded in runs is dlmeval.store.code's (from git when in a checkout).
try:
    from dlmeval._version import version as __version__
except ImportError:
    __version__ = "0.1.0"
