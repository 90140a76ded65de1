"""Mechanistic probes: linear probes for corrupted tokens, DLM denoising-trajectory divergence, AR attention mass.

API
    Token labels
    ``token_labels(model or tokenizer, text, edits, shift=0) -> TokenLabels(ids, offsets, labels)``  1 corrupted, 0 clean,
        -1 special (ignored); ``edits`` are :class:`~dlmeval.robustness.perturb.Edit` records (or ``(start, end)``
        pairs) in output coordinates, ``shift`` moves them (the user message's offset inside a chat template)

    Linear probes (the paper's Sec. 5: l2 logistic regression, C = 1, max_iter = 500, balanced 80/20 split)
    ``layer_indices(n_states, n=17) -> list[int]``   evenly spaced hidden-state indices (embeddings = 0)
    ``probe_dataset(model, texts, edits, seed=0, shifts=None, layers=None, balance=True, batch_size=8)
        -> FeatureSet``                              token vectors of the chosen layers with their labels
    ``linear_probe(X, y, seed=0, groups=None, split="token") -> LayerProbe(accuracy, auroc, n_train, n_test)``
    ``probe_layers(features, seed=0, split="token") -> ProbeResult``  per layer; best-layer accuracy, AUROC

    Denoising trajectories (DLMs)
    ``record_trajectory(sampler, prompt, item_id) -> (SampleResult, Trajectory)``  per nominal step the predicted
        token id and its probability at every generated position
    ``snapshot_steps(T, n=8, low=0.01) -> np.ndarray``  step indices at log-spaced times t = T ... 0.01 T
    ``trajectory_divergence(clean, noisy, steps=None) -> TrajectoryDivergence``  ID divergence, confidence drop,
        stability drop (clean minus noisy) at the snapshot steps

    Attention (AR models)
    ``eager_attention(model)``                       context manager: eager attention while inside (sdpa and
        flash kernels return no attention weights), the previous implementation restored after
    ``attention_mass(attn [H, Q, K], corrupted [K], valid=None, causal=True) -> (mass, base, queries)``
    ``attention_ratio(model, texts, edits, shifts=None, batch_size=8) -> list[AttentionMass]``  per text, per layer

Labels. A token is corrupted when its character span overlaps an edit's output span ``[start, end)``; a deletion
(``start == end``) corrupts the tokens that touch the deletion point (``tok_start <= p <= tok_end``), so a deleted
word marks the token right after the gap. Tokens without a character span (special tokens, chat-template tokens
added by the tokenizer) are -1 and never used.

Probe protocol. ``balance=True`` keeps every corrupted token and a seeded random equal number of clean ones (or the
reverse when clean tokens are fewer), then ``linear_probe`` splits 80/20 stratified by label (``split="token"``,
the paper) or by sequence (``split="sequence"``, no sequence on both sides) and fits
``LogisticRegression(C=1, max_iter=500)`` on the raw hidden states, as the paper's probes (``scaler=True``
standardises the features on the training part first: raw hidden states of large models may not converge in 500
iterations). Accuracy is on the test part; AUROC from the decision
function. :class:`ProbeResult` reports the best layer by accuracy with its accuracy and AUROC, and the maximum
AUROC over layers.

Trajectory metrics, over the snapshot steps ``S`` (default :func:`snapshot_steps`):

* ID divergence: the fraction of (snapshot step, position) cells whose predicted token differs between clean and
  noisy runs;
* confidence drop: the mean over those cells of ``conf_clean - conf_noisy`` (probability of the predicted token);
* stability drop: ``stability_clean - stability_noisy``, stability being the mean over consecutive snapshots of
  the fraction of positions whose prediction is unchanged since the previous snapshot.

The sampler has no per-step callback and its history records which positions changed, not the predictions, so
:func:`record_trajectory` runs the sampler on a thin proxy of the model that reads each forward pass's logits (one
prompt per call: the generated region is then the last ``length`` columns). Steps without a forward pass (skipped
no-op steps, or after the row stopped at EOS) repeat the previous prediction: the model is not time-conditioned,
so its prediction there is unchanged. Predictions are the argmax with the mask token banned, at every generated
position (decided ones included: their prediction is the model's reconstruction).

Attention ratio. For each query position ``q`` that can see at least one corrupted key (causal: keys ``<= q``),
``mass_q`` is the attention it puts on corrupted keys (rows sum to one, so this is a fraction) and ``base_q`` the
fraction of its visible keys that are corrupted (what uniform attention would put there). The ratio is
``mean_{heads, q} mass / mean_q base``: above 1 the model concentrates on the noise, below 1 it suppresses it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dlmeval.errors import InputError
from dlmeval.models.base import length_sorted_batches, position_pairs
from dlmeval.seeding import derive_seed, numpy_rng


# ---------------------------------------------------------------------------------------------------- labels
@dataclass(frozen=True)
class TokenLabels:
    ids: list[int]
    offsets: list[tuple[int, int]]
    labels: np.ndarray  # int8 [n]: 1 corrupted, 0 clean, -1 ignored (no character span)


def _spans(edits: Sequence[Any], shift: int) -> list[tuple[int, int]]:
    out = []
    for e in edits:
        s, t = (e.start, e.end) if hasattr(e, "start") else (int(e[0]), int(e[1]))
        out.append((s + shift, t + shift))
    return out


def label_offsets(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Corruption labels of tokens with character ``offsets`` given edit ``spans`` (module docstring rules)."""
    lab = np.zeros(len(offsets), dtype=np.int8)
    for i, (s, e) in enumerate(offsets):
        if e <= s:
            lab[i] = -1
            continue
        for a, b in spans:
            if (b > a and s < b and a < e) or (b == a and s <= a <= e):
                lab[i] = 1
                break
    return lab


def token_labels(encoder: Any, text: str, edits: Sequence[Any], *, shift: int = 0) -> TokenLabels:
    """Tokenize ``text`` (special tokens added) and label each token corrupted / clean / ignored from ``edits``.

    ``encoder`` is a model (its ``encode_with_offsets``: works without a fast tokenizer) or a fast tokenizer."""
    if not isinstance(text, str):
        raise InputError(f"expected a text, got {type(text).__name__}")
    if hasattr(encoder, "encode_with_offsets"):
        ids, offsets = encoder.encode_with_offsets(text)
        tokenizer = encoder.tokenizer
    else:
        tokenizer = encoder
        enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        ids = [int(t) for t in enc["input_ids"]]
        offsets = [(int(s), int(e)) for s, e in enc["offset_mapping"]]
    spans = _spans(edits, shift)
    for a, b in spans:
        if not 0 <= a <= b <= len(text):
            raise InputError(f"edit span [{a}, {b}) lies outside a text of {len(text)} characters")
    lab = label_offsets(offsets, spans)
    special = {int(t) for t in getattr(tokenizer, "all_special_ids", ())}
    unk = getattr(tokenizer, "unk_token_id", None)
    # an unknown token stands for real (maybe corrupted) text, not a special one
    special.discard(int(unk) if unk is not None else -1)
    for i, t in enumerate(ids):
        if t in special:
            lab[i] = -1
    return TokenLabels(ids, offsets, lab)


# ---------------------------------------------------------------------------------------------------- probes
#: the paper's layer set (Sec. 5: "layers {0, 2, 4, ..., 30, 31} of 32"), as indices into the hidden states
PAPER_LAYERS: tuple[int, ...] = (*range(0, 31, 2), 31)


def layer_indices(n_states: int, n: int = 17) -> list[int]:
    """``n`` evenly spaced indices into ``n_states`` hidden states (first and last included; fewer if
    ``n_states < n``). The paper probes 17 of 32 layers."""
    if n_states < 1 or n < 1:
        raise InputError(f"need at least one hidden state and one layer, got {n_states} and {n}")
    return sorted({int(round(x)) for x in np.linspace(0, n_states - 1, min(n, n_states))})


@dataclass
class FeatureSet:
    layers: list[int]
    X: dict[int, np.ndarray]  # layer -> float32 [N, H]
    y: np.ndarray  # int [N]
    groups: np.ndarray  # int [N]: text index of each token
    positions: np.ndarray  # int [N]: token position in its text


def _balanced(labels: list[np.ndarray], rng: np.random.Generator) -> list[tuple[int, int]]:
    pos = [(t, i) for t, lab in enumerate(labels) for i in np.flatnonzero(lab == 1)]
    neg = [(t, i) for t, lab in enumerate(labels) for i in np.flatnonzero(lab == 0)]
    n = min(len(pos), len(neg))
    keep_pos = [pos[j] for j in sorted(rng.choice(len(pos), size=n, replace=False))] if len(pos) > n else pos
    keep_neg = [neg[j] for j in sorted(rng.choice(len(neg), size=n, replace=False))] if len(neg) > n else neg
    return sorted(keep_pos + keep_neg)


def probe_dataset(
    model: Any,
    texts: Sequence[str],
    edits: Sequence[Sequence[Any]],
    *,
    seed: int = 0,
    shifts: Sequence[int] | None = None,
    layers: Sequence[int] | None = None,
    n_layers: int = 17,
    balance: bool = True,
    batch_size: int = 8,
) -> FeatureSet:
    """Hidden-state vectors of labelled tokens of (perturbed) ``texts`` at ``layers`` (default:
    :func:`layer_indices` of the model's hidden states, ``n_layers`` of them).

    Works for a DiffusionLM and a CausalLM (both have ``hidden_states(ids, attn)``). ``edits[i]`` are the edits
    of ``texts[i]`` (``PerturbResult.edits``), ``shifts[i]`` their offset in the text. ``balance`` subsamples the
    larger class to the smaller one's size, seeded by ``numpy_rng(seed, "probe-balance")``.
    """
    if len(texts) != len(edits):
        raise InputError(f"{len(edits)} edit lists for {len(texts)} texts")
    shifts = list(shifts) if shifts is not None else [0] * len(texts)
    tl = [token_labels(model, t, e, shift=s) for t, e, s in zip(texts, edits, shifts)]
    for t in tl:
        if len(t.ids) > model.max_length:
            raise InputError(
                f"a text of {len(t.ids)} tokens exceeds the model's window of {model.max_length}"
            )
    labels = [t.labels for t in tl]
    if balance:
        keep = _balanced(labels, numpy_rng(seed, "probe-balance"))
    else:
        keep = [(t, int(i)) for t, lab in enumerate(labels) for i in np.flatnonzero(lab >= 0)]
    if not keep:
        raise InputError("no labelled tokens to probe (balanced probes need corrupted and clean tokens)")
    by_text: dict[int, list[int]] = {}
    for t, i in keep:
        by_text.setdefault(t, []).append(int(i))
    feats: dict[int, list[np.ndarray]] = {}
    order: list[tuple[int, int]] = []
    chosen: list[int] | None = list(layers) if layers is not None else None
    todo = sorted(by_text)
    with torch.no_grad():
        for batch in length_sorted_batches([len(tl[t].ids) for t in todo], batch_size=batch_size):
            rows = [todo[b] for b in batch]
            ids, attn = model.pad([tl[t].ids for t in rows])
            hs = model.hidden_states(ids, attn)
            if chosen is None:
                chosen = layer_indices(len(hs), n_layers)
            bad = [x for x in chosen if not -len(hs) <= x < len(hs)]
            if bad:
                raise InputError(f"layers {bad} do not exist: the model has {len(hs)} hidden states")
            off = model.offset(attn).tolist()
            bi = torch.tensor([b for b, t in enumerate(rows) for _ in by_text[t]], device=ids.device)
            pi = torch.tensor([off[b] + i for b, t in enumerate(rows) for i in by_text[t]], device=ids.device)
            for x in chosen:
                feats.setdefault(x, []).append(hs[x][bi, pi].float().cpu().numpy())
            order.extend((t, i) for t in rows for i in by_text[t])
    assert chosen is not None
    y = np.array([int(labels[t][i]) for t, i in order])
    return FeatureSet(
        layers=list(chosen),
        X={x: np.concatenate(v).astype(np.float32) for x, v in feats.items()},
        y=y,
        groups=np.array([t for t, _ in order]),
        positions=np.array([i for _, i in order]),
    )


@dataclass(frozen=True)
class LayerProbe:
    accuracy: float
    auroc: float
    n_train: int
    n_test: int


SPLITS = ("token", "sequence")


def linear_probe(
    X: np.ndarray,
    y: np.ndarray,
    *,
    seed: int = 0,
    groups: np.ndarray | None = None,
    split: str = "token",
    test_size: float = 0.2,
    C: float = 1.0,
    max_iter: int = 500,
    scaler: bool = False,
) -> LayerProbe:
    """Fit an l2 logistic regression on raw hidden states (the paper's probes: no scaling; ``scaler=True``
    standardises the features on the training part first) on a seeded split; test accuracy and AUROC.

    ``split="token"``: stratified by label; ``"sequence"``: whole sequences (``groups``) on one side. The split is
    a function of ``seed`` and the rows only, so every layer of a :class:`FeatureSet` gets the same split.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, roc_auc_score
    from sklearn.model_selection import GroupShuffleSplit, train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(X)
    y = np.asarray(y).astype(int)
    if X.ndim != 2 or len(X) != len(y):
        raise InputError(f"X must be [N, H] with one label per row; got {X.shape} and {len(y)} labels")
    if set(np.unique(y)) != {0, 1}:
        raise InputError("a probe needs both classes (0 clean, 1 corrupted) among the labels")
    if split not in SPLITS:
        raise InputError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    rs = derive_seed(seed, "probe-split") % (2**32)
    idx = np.arange(len(y))
    if split == "token":
        tr, te = train_test_split(idx, test_size=test_size, random_state=rs, stratify=y)
    else:
        if groups is None:
            raise InputError("split='sequence' needs the groups (sequence index of every row)")
        tr, te = next(GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=rs).split(X, y, groups))
    if len(np.unique(y[tr])) < 2 or len(np.unique(y[te])) < 2:
        raise InputError("the split left one side with a single class; probe more sequences")
    steps = [StandardScaler()] if scaler else []
    clf = make_pipeline(*steps, LogisticRegression(C=C, max_iter=max_iter))
    clf.fit(X[tr], y[tr])
    acc = accuracy_score(y[te], clf.predict(X[te]))
    auc = roc_auc_score(y[te], clf.decision_function(X[te]))
    return LayerProbe(float(acc), float(auc), int(len(tr)), int(len(te)))


@dataclass
class ProbeResult:
    layers: list[int]
    accuracy: list[float]
    auroc: list[float]
    best_layer: int  # by test accuracy (first on ties)
    best_accuracy: float
    auroc_at_best: float
    max_auroc: float
    n_train: int
    n_test: int
    n_corrupted: int
    n_clean: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def probe_layers(features: FeatureSet, *, seed: int = 0, split: str = "token", **kw: Any) -> ProbeResult:
    """:func:`linear_probe` at every layer of ``features`` (same split), with the best layer's numbers."""
    res = [
        linear_probe(features.X[x], features.y, seed=seed, groups=features.groups, split=split, **kw)
        for x in features.layers
    ]
    acc = [r.accuracy for r in res]
    auc = [r.auroc for r in res]
    b = int(np.argmax(acc))
    return ProbeResult(
        layers=list(features.layers),
        accuracy=acc,
        auroc=auc,
        best_layer=features.layers[b],
        best_accuracy=acc[b],
        auroc_at_best=auc[b],
        max_auroc=float(max(auc)),
        n_train=res[0].n_train,
        n_test=res[0].n_test,
        n_corrupted=int((features.y == 1).sum()),
        n_clean=int((features.y == 0).sum()),
    )


# ---------------------------------------------------------------------------------------------------- trajectories
@dataclass
class Trajectory:
    """Per nominal step ``t`` (rows) and generated position (columns): the predicted id and its probability."""

    ids: np.ndarray  # int64 [T, L]
    confidence: np.ndarray  # float64 [T, L]
    forwarded: np.ndarray  # bool [T]: a forward pass happened at this step


class _RecordingModel:
    """A read-through proxy of a DiffusionLM whose ``logits`` (and ``logits_at``, the sampler's path) also record
    the predictions over the last ``length`` columns (one prompt per sampler call)."""

    def __init__(self, model: Any, length: int):
        self._model = model
        self._length = length
        self.snapshots: list[tuple[np.ndarray, np.ndarray]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        out = self._model.logits(input_ids, attention_mask)
        z = out[0, -self._length :].double().clone()
        z[:, int(self._model.mask_token_id)] = -math.inf
        p, i = torch.softmax(z, dim=-1).max(dim=-1)
        self.snapshots.append((i.cpu().numpy(), p.cpu().numpy()))
        return out

    def logits_at(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, positions
    ) -> torch.Tensor:
        # the trajectory needs every generated position, not only those the sampler reads: one full pass
        out = self.logits(input_ids, attention_mask)
        bi, pi = position_pairs(positions)
        return out[bi, pi]


def record_trajectory(sampler: Any, prompt: Any, item_id: Any = "0") -> tuple[Any, Trajectory]:
    """Sample one prompt with ``sampler`` (a :class:`~dlmeval.sampling.RemaskingSampler`) and record its
    denoising trajectory (module docstring). Returns the sampler's result and the :class:`Trajectory`."""
    from dlmeval.sampling import RemaskingSampler

    length = sampler.config.length
    proxy = _RecordingModel(sampler.model, length)
    rec = RemaskingSampler(proxy, sampler.config)  # type: ignore[arg-type]
    res = rec.sample([prompt], item_ids=[str(item_id)])
    fwd = np.asarray(res.history.forwarded[:, 0], dtype=bool)
    if int(fwd.sum()) != len(proxy.snapshots):
        raise AssertionError(f"{len(proxy.snapshots)} forward passes seen, {int(fwd.sum())} recorded")
    steps = fwd.shape[0]
    ids = np.full((steps, length), -1, dtype=np.int64)
    conf = np.full((steps, length), np.nan)
    k = -1
    for t in range(steps):
        if fwd[t]:
            k += 1
        if k >= 0:
            ids[t], conf[t] = proxy.snapshots[k]
    return res, Trajectory(ids, conf, fwd)


def snapshot_steps(total_steps: int, n: int = 8, low: float = 0.01) -> np.ndarray:
    """Step indices (0-based, in sampling order) of ``n`` snapshots at log-spaced diffusion times from
    ``t = T`` (the first step) down to ``t = low * T`` (near the end): ``index = T - round(t)``, clipped to
    ``[0, T - 1]``, duplicates dropped."""
    if total_steps < 1 or n < 1 or not 0 < low <= 1:
        raise InputError(f"bad snapshot request: T={total_steps}, n={n}, low={low}")
    t = np.geomspace(total_steps, low * total_steps, n)
    idx = np.clip(total_steps - np.round(t).astype(int), 0, total_steps - 1)
    return np.unique(idx)


@dataclass
class TrajectoryDivergence:
    steps: list[int]
    id_divergence: float
    confidence_drop: float
    stability_clean: float
    stability_noisy: float
    per_step_divergence: list[float] = field(default_factory=list)
    per_step_confidence_drop: list[float] = field(default_factory=list)

    @property
    def stability_drop(self) -> float:
        return self.stability_clean - self.stability_noisy

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "stability_drop": self.stability_drop}


def _stability(ids: np.ndarray) -> float:
    if len(ids) < 2:
        return float("nan")
    return float(np.mean(ids[1:] == ids[:-1]))


def trajectory_divergence(
    clean: Trajectory, noisy: Trajectory, steps: Sequence[int] | None = None
) -> TrajectoryDivergence:
    """Compare a clean and a noisy trajectory at the snapshot ``steps`` (default :func:`snapshot_steps`)."""
    if clean.ids.shape != noisy.ids.shape:
        raise InputError(
            f"trajectories differ in shape {clean.ids.shape} vs {noisy.ids.shape}: use one sampler config"
        )
    s = np.asarray(steps if steps is not None else snapshot_steps(clean.ids.shape[0]), dtype=int)
    if s.size == 0 or s.min() < 0 or s.max() >= clean.ids.shape[0]:
        raise InputError(f"snapshot steps must lie in [0, {clean.ids.shape[0] - 1}]")
    ci, ni = clean.ids[s], noisy.ids[s]
    cc, nc = clean.confidence[s], noisy.confidence[s]
    diff = ci != ni
    drop = cc - nc
    return TrajectoryDivergence(
        steps=s.tolist(),
        id_divergence=float(diff.mean()),
        confidence_drop=float(np.nanmean(drop)),
        stability_clean=_stability(ci),
        stability_noisy=_stability(ni),
        per_step_divergence=diff.mean(1).tolist(),
        per_step_confidence_drop=np.nanmean(drop, axis=1).tolist(),
    )


# ---------------------------------------------------------------------------------------------------- attention
@contextlib.contextmanager
def eager_attention(model: Any) -> Iterator[None]:
    """Run ``model`` (a wrapper with ``.module``, or a Hugging Face model) with eager attention inside the block.

    sdpa / flash attention kernels do not materialise attention weights, so ``output_attentions=True`` returns
    none (or errors) under them; eager attention computes the same outputs the slow way and returns them.
    """
    module = getattr(model, "module", model)
    cfg = getattr(module, "config", None)
    before = getattr(cfg, "_attn_implementation", None)
    switch = before is not None and before != "eager"
    if switch:
        module.set_attn_implementation("eager")
    try:
        yield
    finally:
        if switch:
            module.set_attn_implementation(before)


@dataclass
class AttentionMass:
    """Per layer: the mean attention mass on corrupted keys, the uniform baseline, and their ratio."""

    mass: np.ndarray  # [n_layers]
    baseline: np.ndarray  # [n_layers] (the same in every layer)
    ratio: np.ndarray  # [n_layers]
    queries: int  # query positions that see a corrupted key

    @property
    def mean_ratio(self) -> float:
        return float(np.mean(self.ratio)) if self.ratio.size else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "mass": self.mass.tolist(),
            "baseline": self.baseline.tolist(),
            "ratio": self.ratio.tolist(),
            "queries": self.queries,
            "mean_ratio": self.mean_ratio,
        }


def attention_mass(
    attn: torch.Tensor | np.ndarray,
    corrupted: torch.Tensor | np.ndarray,
    valid: torch.Tensor | np.ndarray | None = None,
    *,
    causal: bool = True,
) -> tuple[float, float, int]:
    """The corruption attention arithmetic for one layer of one row.

    ``attn [H, Q, K]`` (or ``[1, H, Q, K]``) are attention weights, ``corrupted [K]`` marks corrupted keys,
    ``valid [K]`` real (non-padding) positions (queries and keys; default all). Returns ``(mass, base, queries)``:
    ``mass`` the mean over heads and eligible queries of the weight on corrupted keys, ``base`` the mean over
    those queries of the corrupted fraction of their visible keys, and the number of eligible queries (those that
    see a corrupted key; NaNs when none).
    """
    a = torch.as_tensor(attn, dtype=torch.float64)
    if a.dim() == 4:
        if a.shape[0] != 1:
            raise InputError("attention_mass takes one row; loop over the batch")
        a = a[0]
    if a.dim() != 3:
        raise InputError(f"attention must be [H, Q, K], got {tuple(a.shape)}")
    h, q, k = a.shape
    c = torch.as_tensor(corrupted, dtype=torch.bool).reshape(-1)
    v = (
        torch.ones(k, dtype=torch.bool)
        if valid is None
        else torch.as_tensor(valid, dtype=torch.bool).reshape(-1)
    )
    if c.numel() != k or v.numel() != k or q != k:
        raise InputError(
            f"corrupted/valid must have {k} entries and attention must be square, got {tuple(a.shape)}"
        )
    c = c & v
    visible = v.unsqueeze(0).expand(q, k).clone()
    if causal:
        visible &= torch.ones(q, k, dtype=torch.bool).tril()
    n_vis = visible.sum(1)
    n_cor = (visible & c.unsqueeze(0)).sum(1)
    elig = v & (n_cor > 0)
    if not bool(elig.any()):
        return float("nan"), float("nan"), 0
    mass = (a * c.double().view(1, 1, k)).sum(2)  # [H, Q]
    base = n_cor.double() / n_vis.clamp(min=1).double()
    return float(mass[:, elig].mean()), float(base[elig].mean()), int(elig.sum())


def attention_ratio(
    model: Any,
    texts: Sequence[str],
    edits: Sequence[Sequence[Any]],
    *,
    shifts: Sequence[int] | None = None,
    batch_size: int = 8,
) -> list[AttentionMass]:
    """The corruption attention ratio of a causal LM on each (perturbed) text, per layer.

    Runs ``model.forward(..., output_attentions=True)`` under :func:`eager_attention`; labels come from
    :func:`token_labels`. A text without corrupted tokens gets NaN ratios.
    """
    if len(texts) != len(edits):
        raise InputError(f"{len(edits)} edit lists for {len(texts)} texts")
    shifts = list(shifts) if shifts is not None else [0] * len(texts)
    tl = [token_labels(model, t, e, shift=s) for t, e, s in zip(texts, edits, shifts)]
    out: list[AttentionMass | None] = [None] * len(texts)
    with eager_attention(model), torch.no_grad():
        for batch in length_sorted_batches([len(t.ids) for t in tl], batch_size=batch_size):
            ids, attn = model.pad([tl[i].ids for i in batch])
            res = model.forward(ids, attn, output_attentions=True)
            layers = getattr(res, "attentions", None)
            if not layers or layers[0] is None:
                raise InputError("the model returned no attention weights even with eager attention")
            off = model.offset(attn).tolist()
            for b, i in enumerate(batch):
                n = len(tl[i].ids)
                sl = slice(off[b], off[b] + n)
                cor = torch.as_tensor(tl[i].labels == 1)
                mass, base, nq = [], [], 0
                for layer in layers:
                    m, bs, nq = attention_mass(layer[b, :, sl, sl].cpu(), cor)
                    mass.append(m)
                    base.append(bs)
                mass_a, base_a = np.array(mass), np.array(base)
                with np.errstate(invalid="ignore", divide="ignore"):
                    ratio = mass_a / base_a
                out[i] = AttentionMass(mass_a, base_a, ratio, nq)
    return [o for o in out if o is not None]
