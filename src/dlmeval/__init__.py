"""dlmeval: evaluation toolkit for masked diffusion language models.

The Python API (each name imported on first use, so ``import dlmeval`` loads neither torch nor pandas;
docs/python.md has runnable examples):

    load_model(spec="default", *, device="auto", dtype="auto", trust_remote_code=False, allow_download=False)
        a diffusion LM from a model spec (``default``, ``llada:PATH``, ``dream:PATH``, ``hf:PATH``, ``tiny-*``)
    score(candidates, sources=None, *, model="default", config=None, preset="standard", seed=0, **scorer_kwargs)
        DiffScore of texts as a pandas frame; without sources unconditional (``marginal``), with them ``cond``
    sample(prompts, *, model="default", length=32, steps=None, nfe=None, strategy="none", temperature=0.0, seed=0)
        remasking-sampler generations as a frame (``prompt``, ``text``, ``nfe``: forward passes counted)
    run_spec(spec, *, store=None, **kwargs)
        run or resume a Care / robustness spec (``care-tiny``, ``robust-demo``, a TOML file) into a run store
    runs(store=None, kind=None)          the runs of a run store, as a pandas frame
    run_items(run, store=None)           one run's stored results, as a pandas frame
    DiffScorer                           the scorer class (dlmeval.scoring) for full control
    register_plugin(module)              load a plugin module's registrations (dlmeval.plugins)

The command line is ``dlmeval`` (``dlmeval --help``); lm-evaluation-harness users: ``dlmeval lm-eval``.
"""

from dlmeval.lazy import lazy_exports

# written by setuptools-scm when the package is built or installed (from git); a plain source tree (PYTHONPATH=src,
# no install) has none. The version recorded in runs is dlmeval.store.code's (from git when in a checkout).
try:
    from dlmeval._version import version as __version__
except ImportError:
    __version__ = "0.1.0"

_EXPORTS = {
    "load_model": "api",
    "score": "api",
    "sample": "api",
    "run_spec": "api",
    "runs": "api",
    "run_items": "api",
    "DiffScorer": "scoring",
    "register_plugin": "plugins",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
