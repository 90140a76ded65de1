"""dlmeval from Python: the few calls a notebook needs, each a thin front to the package that does the work.

>>> import dlmeval
>>> model = dlmeval.load_model("tiny-llada")                       # any model spec (`dlmeval models`)
>>> df = dlmeval.score(["the cat sat on the mat"], model=model)    # no sources: unconditional (marginal)
>>> df.loc[0, "config"], int(df.loc[0, "n_tokens"])
('marginal', 6)
>>> out = dlmeval.sample(["the cat"], model=model, length=8, steps=4)
>>> int(out.loc[0, "nfe"]) <= 4, out.attrs["nfe_calls"] <= 4      # every forward pass counted
(True, True)

``run_spec("care-tiny", store=path)`` runs (or resumes) a Care or robustness spec into a run store;
``runs(path)`` lists a store's runs and ``run_items(run_id, path)`` reads one run's results, both as pandas frames.
Nothing here imports torch until a call needs it (``import dlmeval`` stays light).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from dlmeval.errors import InputError


def load_model(
    spec: str = "default",
    *,
    device: str | None = "auto",
    dtype: str | None = "auto",
    trust_remote_code: bool = False,
    allow_download: bool = False,
):
    """A diffusion LM from a model spec (``default``, ``llada:PATH``, ``dream:PATH``, ``hf:PATH``, ``tiny-*``); see
    :func:`dlmeval.models.load_diffusion`. Offline and without checkpoint code unless asked."""
    from dlmeval.models import load_diffusion

    return load_diffusion(
        spec, device=device, dtype=dtype, trust_remote_code=trust_remote_code, allow_download=allow_download
    )


def _model(model):
    return load_model(model) if isinstance(model, str) else model


def score(
    candidates: Sequence[str] | str,
    sources: Sequence[str] | str | None = None,
    *,
    model: Any = "default",
    config: str | None = None,
    preset: str = "standard",
    seed: int = 0,
    **scorer_kwargs: Any,
):
    """DiffScore of each candidate, one row per candidate (:meth:`dlmeval.scoring.DiffScorer.score`): conditional on
    ``sources`` when given, else unconditional (``config="marginal"``). ``model``: a spec or a loaded model;
    ``preset``: ``standard``, ``fast``, ``paper``, ``paper-fast``; other keywords go to the scorer."""
    from dlmeval.scoring import DiffScorer

    scorer = DiffScorer.from_preset(_model(model), preset, seed=seed, **scorer_kwargs)
    return scorer.score(candidates, sources, config=config)


def sample(
    prompts: Sequence[str] | str,
    *,
    model: Any = "default",
    length: int = 32,
    steps: int | None = None,
    nfe: int | None = None,
    strategy: str = "none",
    temperature: float = 0.0,
    seed: int = 0,
    **config: Any,
):
    """Generate ``length`` tokens after each prompt with the remasking sampler (:mod:`dlmeval.sampling`): ``steps``
    (nominal) or an ``nfe`` budget, a ``strategy`` and the unmask ``temperature``. Returns a frame with ``prompt``,
    ``text`` and ``nfe`` (the forward passes each row took part in); ``attrs`` hold ``nfe_calls`` (the batched model
    calls) and the sampler ``config``."""
    import pandas as pd

    from dlmeval.sampling import SamplerConfig
    from dlmeval.sampling import sample as _sample

    texts = [prompts] if isinstance(prompts, str) else list(prompts)
    if steps is None and nfe is None:
        steps = length
    cfg = SamplerConfig(
        length=length, steps=steps, nfe=nfe, strategy=strategy, temperature=temperature, seed=seed, **config
    )
    res = _sample(_model(model), texts, cfg)
    df = pd.DataFrame({"prompt": texts, "text": list(res.texts), "nfe": [int(n) for n in res.nfe]})
    df.attrs.update(nfe_calls=int(res.nfe_calls), config=dict(res.config))
    return df


def run_spec(spec: str | os.PathLike, *, store: str | os.PathLike | None = None, **kwargs: Any):
    """Run (or resume) a protocol spec (a built-in name such as ``care-tiny`` or ``robust-tiny``, or a TOML file)
    into the run store ``store`` (default: ``DLMEVAL_STORE`` or the user data directory); keywords go to
    :func:`dlmeval.protocols.care.run_care` / :func:`dlmeval.protocols.robust.run_robust` (``device``,
    ``out_dir``, ``models``, ``progress``...), or, for a leaderboard spec (``kind = "care-leaderboard"``), to
    :func:`dlmeval.protocols.care.leaderboard.run_leaderboard`. Returns the protocol's result (its tables and run
    ids; a leaderboard's ``(run id, table)``)."""
    import tomllib
    from pathlib import Path

    from dlmeval.store import RunStore

    name = str(spec)
    if Path(name).is_file():
        name = str(tomllib.loads(Path(name).read_text(encoding="utf-8")).get("name", Path(name).stem))
    from dlmeval.protocols.care.leaderboard import is_leaderboard_spec

    if is_leaderboard_spec(
        spec
    ):  # kind = "care-leaderboard": its rows, each a Care run, and the paper's table
        from dlmeval.protocols.care.leaderboard import load_leaderboard as load_spec
        from dlmeval.protocols.care.leaderboard import run_leaderboard as runner
    elif name.startswith("care"):
        from dlmeval.protocols.care import load_spec
        from dlmeval.protocols.care import run_care as runner
    elif name.startswith("robust"):
        from dlmeval.protocols.robust import load_spec
        from dlmeval.protocols.robust import run_robust as runner
    else:
        raise InputError(
            f"spec {spec!r}: a Care spec's name starts with 'care', a robustness spec's with 'robust'"
        )
    kwargs.setdefault("progress", False)
    with RunStore(store) as st:
        return runner(load_spec(spec), st, **kwargs)


def runs(store: str | os.PathLike | None = None, kind: str | None = None):
    """The runs of a store as a pandas frame (one row per run: id, kind, status, models, created...)."""
    import pandas as pd

    from dlmeval.store import RunStore

    with RunStore(store, must_exist=True) as st:
        return pd.DataFrame(st.list_runs(kind))


def run_items(run: str, store: str | os.PathLike | None = None):
    """One run's stored results as a pandas frame (one row per item; ``run`` is a run id or a unique prefix)."""
    from dlmeval.store import RunStore

    with RunStore(store, must_exist=True) as st:
        return st.get_run(run).items()
