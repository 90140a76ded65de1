"""MAUVE (Pillutla et al. 2021) between generated and reference texts via the ``mauve`` package, on features from a
pluggable featurizer (see :mod:`dlmeval.metrics.features`)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlmeval.errors import InputError
from dlmeval.metrics.features import Featurizer, ar_featurizer, minilm_featurizer
from dlmeval.seeding import derive_seed


@dataclass(frozen=True)
class MauveResult:
    mauve: float
    frontier_integral: float
    mauve_star: float
    num_buckets: int
    seed: int  # the seed passed in
    kmeans_seed: int  # the seed handed to mauve (PCA random_state = kmeans_seed + 1, faiss k-means = + 2)
    n_p: int
    n_q: int
    featurizer: str


def auto_buckets(n_p: int, n_q: int) -> int:
    """The MAUVE paper's default ("auto"): ``max(2, round(min(n_p, n_q) / 10))`` clusters."""
    return max(2, int(round(min(n_p, n_q) / 10)))


def resolve_featurizer(featurizer: str | Featurizer, ar=None) -> tuple[Featurizer, str]:
    if callable(featurizer):
        return featurizer, str(getattr(featurizer, "name", getattr(featurizer, "__name__", "custom")))
    if featurizer == "minilm":
        f = minilm_featurizer()
        return f, "minilm"
    if featurizer == "ar":
        if ar is None:
            raise InputError('featurizer="ar" needs the causal evaluator: pass ar=<CausalLM>')
        f = ar_featurizer(ar)
        return f, f.name  # type: ignore[attr-defined]
    raise InputError(f"unknown featurizer {featurizer!r}; use 'minilm', 'ar' or a callable texts -> array")


def mauve_score(
    p_texts: Sequence[str] | None,
    q_texts: Sequence[str] | None,
    featurizer: str | Featurizer = "minilm",
    seed: int = 0,
    *,
    ar=None,
    p_features: np.ndarray | None = None,
    q_features: np.ndarray | None = None,
    num_buckets: int | str = "auto",
    kmeans_num_redo: int = 5,
    kmeans_max_iter: int = 500,
    kmeans_explained_var: float = 0.9,
    scaling_factor: float = 5.0,
) -> MauveResult:
    """MAUVE between ``p_texts`` (e.g. generations) and ``q_texts`` (e.g. human references); 1 = same distribution.

    Texts are featurized by ``featurizer`` (``"minilm"``, ``"ar"`` with ``ar=``, or any callable texts ->
    ``[n, d]`` array) unless ``p_features`` / ``q_features`` are given (featurize a reference set once and pass its
    features to every comparison). Then ``mauve.compute_mauve(p_features=..., q_features=...)`` with the package's
    defaults (PCA to 90% variance, faiss k-means with 5 restarts, scaling factor 5). ``num_buckets="auto"`` is
    ``max(2, round(min(n_p, n_q) / 10))``, the MAUVE paper's rule; Care used K = 500 on its sample sizes.
    ``seed`` is mapped to the package's k-means/PCA seed by ``derive_seed(seed, "mauve")``; the same seed and
    inputs give the same score, and both seeds are recorded in the result.
    """
    import mauve

    name = "precomputed"
    if p_features is None or q_features is None:
        f, name = resolve_featurizer(featurizer, ar)
    if p_features is None:
        if p_texts is None:
            raise InputError("pass p_texts or p_features")
        p_features = f(p_texts)
    if q_features is None:
        if q_texts is None:
            raise InputError("pass q_texts or q_features")
        q_features = f(q_texts)
    p = np.asarray(p_features, dtype=np.float32)
    q = np.asarray(q_features, dtype=np.float32)
    if p.ndim != 2 or q.ndim != 2 or p.shape[1] != q.shape[1]:
        raise InputError(f"features must be [n, d] arrays of equal d, got {p.shape} and {q.shape}")
    if min(len(p), len(q)) < 2:
        raise InputError(f"MAUVE needs at least 2 texts per side, got {len(p)} and {len(q)}")
    if not (np.isfinite(p).all() and np.isfinite(q).all()):
        raise InputError("features hold NaN/inf values")
    if num_buckets == "auto":
        k = auto_buckets(len(p), len(q))
    elif isinstance(num_buckets, int | np.integer) and num_buckets >= 2:
        k = int(num_buckets)
    else:
        raise InputError(f"num_buckets must be 'auto' or an integer >= 2, got {num_buckets!r}")
    if k > len(p) + len(q):
        raise InputError(f"{k} buckets for only {len(p) + len(q)} texts; lower num_buckets")
    # faiss takes a C int seed and mauve adds up to 5 to it
    kseed = derive_seed(int(seed), "mauve") % (2**31 - 8)
    with _filtered_native_stderr(_FAISS_NOISE):
        out = mauve.compute_mauve(
            p_features=p,
            q_features=q,
            num_buckets=k,
            kmeans_num_redo=kmeans_num_redo,
            kmeans_max_iter=kmeans_max_iter,
            kmeans_explained_var=kmeans_explained_var,
            mauve_scaling_factor=scaling_factor,
            seed=kseed,
            verbose=False,
        )
    return MauveResult(
        float(out.mauve),
        float(out.frontier_integral),
        float(out.mauve_star),
        int(out.num_buckets),
        int(seed),
        int(kseed),
        len(p),
        len(q),
        name,
    )


# faiss's k-means writes "WARNING clustering N points to K centroids: please provide at least ..." from C++ straight
# to file descriptor 2 on every call with few texts per bucket (always, at demo sizes); the bucket count is our
# documented choice, so the line is noise. Python's warnings / logging cannot reach it: the descriptor is swapped
# for a temporary file during the call and every other line is written back.
_FAISS_NOISE = ("WARNING clustering ",)


@contextlib.contextmanager
def _filtered_native_stderr(prefixes: tuple[str, ...]):
    fd = 2  # what native code writes to, whatever Python's sys.stderr is
    try:
        os.fstat(fd)
    except OSError:  # no descriptor 2 at all
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            kept = [
                line
                for line in tmp.read().decode("utf-8", "replace").splitlines(keepends=True)
                if not line.startswith(prefixes)
            ]
            if kept:
                os.write(fd, "".join(kept).encode("utf-8"))
