"""dlmeval: evaluation toolkit for masked diffusion language models."""

try:  # written by setuptools-scm when the package is built or installed (from git)
    from dlmeval._version import version as __version__
except ImportError:  # a plain source tree (PYTHONPATH=src, no install); the version in runs: dlmeval.store.code
    __version__ = "0.1.0"
