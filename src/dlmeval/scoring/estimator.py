"""The DiffScore estimator: Monte Carlo masked reconstruction scores from a :class:`~dlmeval.models.DiffusionLM`.

For a text of ``L`` scored tokens (the candidate, or the source for ``reverse``) the estimator draws K masking
patterns over T masking rates (:mod:`dlmeval.scoring.masks`), replaces the hidden tokens by the model's mask token,
and reads ``log p(x_i | x_t)`` at every hidden position through the masked-scoring core (:mod:`dlmeval.scoring.core`:
``model.score_positions``, never a ``[B, L, V]`` tensor). Each mask ``M_j`` at rate ``t_k`` gives one value ``v_j = w_j * sum_{i in M_j} log p(x_i | x_t)`` with
the weight of the paper (DiffScore appendix D.5, Table 22):

* ``mlp`` (default): ``w = 1 / |M_j|``, the mean log-probability of the hidden tokens,
* ``elbo``: ``w = 1 / t_k``, the paper's "strict ELBO weighting": the mean over masks is the Monte Carlo ELBO of
  the whole text (a lower bound on ``log p(text)``, a sum over its tokens, so it scales with L); a mask drawn empty
  is the empty sum 0,
* ``elbo_norm``: ``w = 1 / (t_k L)``, the ELBO per token (``elbo / L``; until this weighting was split off,
  ``elbo`` meant this),

and the score is the mean of the ``v_j``; the profile ``S(t_k)`` is the mean of the ``v_j`` at rate ``t_k``. Token
scores are the mean ``log p`` of each token over the masks that hid it.

Presets (:data:`PRESETS`, :func:`resolve_estimator`, ``--preset`` on the command line): ``paper`` is exactly the
paper's estimator (K = 20 masks over T = 10 rates ``t_k = k / 10``, independent Bernoulli(``t_k``) masks, MLP
weighting) and ``paper-fast`` its DiffScore-Fast (K = 5, T = 5); ``standard`` (the default) and ``fast`` have
the same K, T and weighting with ``combined`` masks (:mod:`dlmeval.scoring.stratified`: an exact pass at t = 1,
stratified complementary draws and a control variate), which have the same expectation and a lower variance; the
score is then the weighted sum of the per-mask values (``MaskSet.weight``).

Work is packed across items: every masked copy of every item is a row, rows are cut into length-sorted batches
(:func:`dlmeval.models.length_sorted_batches`), identical masks of one item are computed once, and a source
shared by many candidates is tokenized once (the batching, padding and mask token are the core's). Masks come from a generator seeded by (seed, item, masked side,
scheme, K, T), so which masks an item gets never depends on the call. A row's log-probabilities are computed
independently of the other rows up to float rounding: the padded width and the batch shape can move the last
bits (below 1e-6 on the CPU in float32, measured in ``benchmarks/bench_score_identity.py``). So the same call
gives the same bits, and a stored run (:mod:`dlmeval.protocols.score`) fixes its calls by canonical chunks.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dlmeval.errors import InputError
from dlmeval.progress import progress_bar
from dlmeval.scoring.configs import (
    COMPONENTS,
    MASKED_SIDE,
    NEEDS_SOURCE,
    Layout,
    PairFormatter,
    resolve_config,
)
from dlmeval.scoring.core import SCORING_VOCAB, MaskedRow, iter_scores
from dlmeval.scoring.masks import MaskSet, make_masks, rate_grid
from dlmeval.scoring.spec import (  # noqa: F401  (re-exported: the estimator API)
    PRESETS,
    WEIGHTINGS,
    EstimatorSpec,
    mask_values,
    resolve_estimator,
)
from dlmeval.scoring.stratified import has_rate_profile
from dlmeval.seeding import numpy_rng

log = logging.getLogger(__name__)

#: an item whose scored text has more than this share of unknown tokens gets a warning (and the run one summary)
UNK_WARN_RATE = 0.2
RUN_KIND = "diffscore"


@dataclass(frozen=True)
class Prepared:
    """The checked inputs of one :meth:`DiffScorer.score` call: the resolved configuration, the id of every input
    row, the unique items ``(id, candidate, source, store key)`` and the index of each id among them."""

    cfg: str
    ids: list[str]
    items: list[tuple[str, str, str | None, str]]
    unique: dict[str, int]
    user_ids: bool


@dataclass
class _Direction:
    """One direction (marginal / cond / reverse) of one unique item."""

    item: int
    kind: str
    layout: Layout
    side: str
    masks: MaskSet | None
    mask_row: np.ndarray | None = None  # [n_masks] -> global row index
    values: np.ndarray | None = None  # [n_masks] weighted per-mask values
    token_lp: np.ndarray | None = None  # [n_masks, L], NaN where not hidden
    reason: str | None = None


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode()).hexdigest()[:16]


def _as_texts(x: Any, what: str) -> list:
    if isinstance(x, str):
        return [x]
    if isinstance(x, pd.Series):
        x = x.tolist()
    try:
        return list(x)
    except TypeError:
        raise InputError(f"{what} must be a string or a list of strings, got {type(x).__name__}") from None


class DiffScorer:
    """Score candidates (given sources) by masked reconstruction with a diffusion LM.

    >>> from dlmeval.models import tiny_model
    >>> model = tiny_model("bert")
    >>> scorer = DiffScorer(model)                       # K=20 masks over T=10 rates, combined masks, MLP
    >>> scorer = DiffScorer.paper(model)                 # the paper's estimator (independent Bernoulli masks)
    >>> df = scorer.score(["the cat sat"], sources=["a cat sat on the mat"], config="cond")
    >>> bool(df.loc[0, "score"] < 0), "kind:diffscore" in df.attrs["signature"]
    (True, True)

    ``n_masks`` (K) and ``n_rates`` (T): :data:`PRESETS` ``standard`` (20, 10) and ``fast`` (5, 5, see
    :meth:`fast`). ``scheme``: ``combined`` (default, :mod:`dlmeval.scoring.stratified`), ``independent`` (the
    paper), ``balanced``, ``exact-count``, ``pll`` (exact pseudo-log-likelihood) or one of the single tools of
    :mod:`~dlmeval.scoring.stratified`. ``weighting``: ``mlp`` (default), ``elbo`` (1/t) or ``elbo_norm`` (1/(tL)).
    :meth:`paper` / :meth:`from_preset` / :meth:`from_spec` build a scorer from a preset. ``prompt``: a template with
    ``{source}`` or a name from :data:`dlmeval.scoring.configs.PROMPTS`; ``chat``: use the model's chat template
    (default: when it has one). ``batch_size`` / ``max_tokens`` bound the rows and the padded tokens of one forward
    pass (they change a score only by float rounding, below 1e-6 on the CPU; a stored run records them).
    """

    def __init__(
        self,
        model,
        *,
        n_masks: int = 20,
        n_rates: int = 10,
        scheme: str = "combined",
        weighting: str = "mlp",
        seed: int = 0,
        prompt: str | None = None,
        chat: bool | None = None,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        progress: bool = False,
    ):
        self.model = model
        self.spec = EstimatorSpec(int(n_masks), int(n_rates), scheme, weighting)
        self.seed = int(seed)
        self.formatter = PairFormatter(model, prompt=prompt, chat=chat)
        self.batch_size = batch_size
        if max_tokens is None:
            # CPU: 2,048 padded tokens per pass was the fastest budget on ARC requests and SummEval pairs, 8,192
            # was 1.04-1.45x slower (benchmarks/bench_scorer_budget.py, docs/benchmarks.md)
            max_tokens = 2048 if getattr(model.device, "type", "cpu") == "cpu" else 65536
        self.max_tokens = max(int(max_tokens), int(model.max_length))
        self.progress = progress
        self.rows_scored = 0  # rows forwarded by the last score() call (after de-duplication)

    @classmethod
    def fast(cls, model, **kw) -> DiffScorer:
        """DiffScore-Fast's K=5 masks over T=5 rates, with the default (combined) masks; the paper's own Fast
        estimator is ``DiffScorer.paper(model, fast=True)``."""
        kw.setdefault("n_masks", PRESETS["fast"].n_masks)
        kw.setdefault("n_rates", PRESETS["fast"].n_rates)
        return cls(model, **kw)

    @classmethod
    def from_spec(cls, model, spec: EstimatorSpec, **kw) -> DiffScorer:
        """A scorer with the estimator settings ``spec`` (``kw``: seed, prompt, chat, batch sizes, progress)."""
        for k in ("n_masks", "n_rates", "scheme", "weighting"):
            if k in kw:
                raise InputError(f"{k} is set by the estimator spec; change the spec instead")
        return cls(
            model,
            n_masks=spec.n_masks,
            n_rates=spec.n_rates,
            scheme=spec.scheme,
            weighting=spec.weighting,
            **kw,
        )

    @classmethod
    def from_preset(cls, model, name: str, *, fast: bool = False, **kw) -> DiffScorer:
        """A scorer with the settings of the preset ``name`` (:data:`PRESETS`)."""
        return cls.from_spec(model, resolve_estimator(name, fast=fast), **kw)

    @classmethod
    def paper(cls, model, *, fast: bool = False, **kw) -> DiffScorer:
        """The paper's estimator (:meth:`EstimatorSpec.paper`): K=20 masks over T=10 rates, independent
        Bernoulli(t_k) masks, MLP weighting; ``fast=True``: DiffScore-Fast (K=5, T=5)."""
        return cls.from_spec(model, EstimatorSpec.paper(fast=fast), **kw)

    # ------------------------------------------------------------------ identity
    @property
    def rates(self) -> np.ndarray:
        return rate_grid(self.spec.n_rates)

    def run_config(self, config: str) -> dict[str, Any]:
        """The configuration recorded in the run signature for ``config``."""
        return {"config": resolve_config(config), **self.spec.as_dict(), **self.formatter.describe()}

    def signature(self, config: str):
        """A :class:`dlmeval.store.Signature` for this scorer, model, configuration and seed."""
        from dlmeval.store.signature import Signature

        return Signature.create(RUN_KIND, self.run_config(config), [self.model.identity()], self.seed)

    def validate(
        self,
        candidates: Sequence[str] | str,
        sources: Sequence[str | None] | str | None = None,
        *,
        config: str | None = None,
        item_ids: Sequence[Any] | None = None,
    ) -> None:
        """Every check :meth:`score` makes on its inputs, without scoring (InputError on the first problem): call
        it before opening a run, so bad inputs leave the store as it was."""
        self.prepare(candidates, sources, config=config, item_ids=item_ids)

    def _inputs(self, candidates, sources, config, item_ids):
        # no config: conditional on the sources when there are any, else unconditional (the candidate alone)
        cfg = resolve_config(
            config if config is not None else ("cond" if sources is not None else "marginal")
        )
        cands = _as_texts(candidates, "candidates")
        n = len(cands)
        if n == 0:
            raise InputError("no candidates to score (an empty list or file)")
        for i, c in enumerate(cands):
            if not isinstance(c, str):
                raise InputError(f"candidate {i} is a {type(c).__name__}, not a string")
        if sources is None:
            if cfg in NEEDS_SOURCE:
                raise InputError(
                    f"the {cfg!r} configuration needs a source for every candidate; pass sources=[...] "
                    "or use config='marginal'"
                )
            srcs: list[str | None] = [None] * n
        else:
            srcs = _as_texts(sources, "sources")
            if len(srcs) != n:
                raise InputError(f"got {n} candidates but {len(srcs)} sources; pass one source per candidate")
            for i, s in enumerate(srcs):
                if s is None and cfg in NEEDS_SOURCE:
                    raise InputError(
                        f"source {i} is missing; the {cfg!r} configuration needs one per candidate"
                    )
                if s is not None and not isinstance(s, str):
                    raise InputError(f"source {i} is a {type(s).__name__}, not a string")
            if cfg not in NEEDS_SOURCE:
                srcs = [None] * n  # marginal ignores the sources
        if item_ids is not None:
            ids = [str(x) for x in _as_texts(item_ids, "item_ids")]
            if len(ids) != n:
                raise InputError(f"got {n} candidates but {len(ids)} item ids")
        else:
            ids = ["h" + _digest(c, s) for c, s in zip(cands, srcs, strict=True)]
        return cfg, cands, srcs, ids, item_ids is not None

    # ------------------------------------------------------------------ the API
    def score(
        self,
        candidates: Sequence[str] | str,
        sources: Sequence[str | None] | str | None = None,
        *,
        config: str | None = None,
        item_ids: Sequence[Any] | None = None,
        token_scores: bool = False,
    ) -> pd.DataFrame:
        """Score every candidate; returns one row per input, in input order. ``config`` defaults to ``cond`` when
        ``sources`` are given and to ``marginal`` (the candidate alone, unconditional) when they are not.

        Columns: ``item_id``, ``config``, ``score`` (NaN with ``reason`` for an empty text), ``se`` (Monte Carlo
        standard error; conservative for the balanced scheme, NaN when a rate has a single sampling unit),
        ``profile`` (list of T values ``S(t_k)``, rates in ``df.attrs["rates"]``), ``n_tokens`` (scored tokens),
        ``n_masks``, ``reason``, ``warning`` (source / candidate truncation), ``signature``; for ``bidir`` and
        ``pmi`` also ``score_<direction>``, ``se_<direction>``, ``n_tokens_<direction>`` of both directions. With
        ``token_scores=True``: ``tokens``, ``token_logprob`` (mean log p of each token over the masks that hid
        it) and ``token_rate_logprob`` (T lists, NaN where a rate never hid the token), suffixed ``_<direction>``
        for ``bidir``/``pmi`` (and ``token_pmi`` for ``pmi``).

        ``item_ids`` name the items (default: a hash of the texts); masks are seeded by the item id, or, without
        ids, by the text that is masked, so ``cond`` and ``marginal`` of one candidate share masks (PMI coupling)
        even across calls. The call is pure: texts in, frame out. The rows of all its items are packed into
        length-sorted batches, and a row's last bits can depend on the rows it shares a forward pass with, so the
        same call gives the same bits; a stored, resumable, data-parallel run (:mod:`dlmeval.protocols.score`)
        cuts its items into canonical chunks and calls this once per chunk.
        """
        prep = self.prepare(candidates, sources, config=config, item_ids=item_ids)
        results = self.compute(prep, range(len(prep.items)), token_scores=token_scores)
        self.report(prep.cfg, list(results.values()), log.warning)
        return self.frame(prep, results)

    def prepare(
        self,
        candidates: Sequence[str] | str,
        sources: Sequence[str | None] | str | None = None,
        *,
        config: str | None = None,
        item_ids: Sequence[Any] | None = None,
    ) -> Prepared:
        """The checked inputs of a call and its unique items (identical ids must carry identical texts). The store
        key is the content: a user id is a label, so it is joined with a digest of the texts it names; the same id
        with other texts (another system's outputs scored into the same store) is another item."""
        cfg, cands, srcs, ids, user_ids = self._inputs(candidates, sources, config, item_ids)
        unique: dict[str, int] = {}
        uitems: list[tuple[str, str, str | None, str]] = []
        for i, key in enumerate(ids):
            j = unique.get(key)
            if j is None:
                unique[key] = len(uitems)
                skey = f"{key}#{_digest(cands[i], srcs[i])}" if user_ids else key
                uitems.append((key, cands[i], srcs[i], skey))
            elif uitems[j][1:3] != (cands[i], srcs[i]):
                raise InputError(f"item id {key!r} is used for two different (candidate, source) pairs")
        return Prepared(cfg, ids, uitems, unique, user_ids)

    def compute(
        self, prep: Prepared, items, *, token_scores: bool = False, progress: bool | None = None
    ) -> dict[int, dict[str, Any]]:
        """``{j: result}`` of the unique items ``items`` (indices into ``prep.items``), their rows packed into
        one set of length-sorted batches (``progress``: a bar over the rows; default the scorer's setting)."""
        results: dict[int, dict[str, Any]] = {}
        todo = list(items)
        if todo:
            bar = self.progress if progress is None else progress
            self._compute(prep.cfg, prep.items, todo, prep.user_ids, token_scores, results, bar)
        return results

    def frame(self, prep: Prepared, results: dict[int, dict[str, Any]], signature=None) -> pd.DataFrame:
        """The output frame of a call from the results of its unique items (see :meth:`score`). ``signature``:
        the stored signature of the run the results are in (a :class:`dlmeval.store.Signature`), which the frame
        then carries (signature and config) instead of this scorer's own: what is printed is what is stored."""
        cfg = prep.cfg
        if signature is not None:
            sig_short, sig_dict = signature.short(), signature.as_dict()
        else:
            sig_short, sig_dict = self._signature_info(cfg)
        rows = []
        for key in prep.ids:
            r = dict(results[prep.unique[key]])
            rows.append({"item_id": key, "config": cfg, **r})
        df = pd.DataFrame(rows)
        for col in ("score", "se"):
            df[col] = df[col].astype(float)
        for col in ("reason", "warning"):
            df[col] = df[col].astype(object).where(df[col].notna(), None)
        df["signature"] = sig_short
        df.attrs["signature"] = sig_short
        df.attrs["signature_dict"] = sig_dict
        df.attrs["config"] = dict(signature.config) if signature is not None else self.run_config(cfg)
        df.attrs["rates"] = [] if self.spec.scheme == "pll" else [float(t) for t in self.rates]
        df.attrs["warnings"] = sorted({w for w in df["warning"].dropna()}) if "warning" in df else []
        return df

    def report(self, cfg: str, new: list[dict[str, Any]], warn) -> None:
        """One summary warning per kind of text problem and of truncation among the results ``new``, given to
        ``warn`` (``log.warning``, or a run's ``warn``)."""
        self._report_truncation(cfg, new, warn)
        self._report_texts(cfg, new, warn)

    # ------------------------------------------------------------------ internals
    def _signature_info(self, cfg: str) -> tuple[str, dict]:
        try:
            sig = self.signature(cfg)
            return sig.short(), sig.as_dict()
        except ImportError:  # the store layer is optional for pure scoring
            ident = self.model.identity()
            d = {
                "kind": RUN_KIND,
                "config": self.run_config(cfg),
                "models": [ident.as_dict()],
                "seed": self.seed,
            }
            return f"kind:{RUN_KIND}|model:{ident.name}@{ident.weights_sha256[:8]}|seed:{self.seed}", d

    def _mask_seed_key(self, key: str, cand: str, src: str | None, side: str, user_ids: bool) -> str:
        if user_ids:
            return key
        return "c:" + _digest(cand) if side == "candidate" else "s:" + _digest(src)

    def _masks_for(self, seed_key: str, side: str, length: int) -> MaskSet:
        sp = self.spec
        # exact-count masks are seeded as the former default ("balanced") was, so they reproduce its masks
        seed_scheme = "balanced" if sp.scheme == "exact-count" else sp.scheme
        rng = numpy_rng(self.seed, "diffscore-masks", seed_key, side, seed_scheme, sp.n_masks, sp.n_rates)
        return make_masks(sp.scheme, length, sp.n_masks, sp.n_rates, rng)

    def _directions(self, cfg, uitems, todo, user_ids) -> list[_Direction]:
        dirs: list[_Direction] = []
        for j in todo:
            key, cand, src, _ = uitems[j]
            for kind in COMPONENTS[cfg]:
                side = MASKED_SIDE[kind]
                layout = self.formatter.layout(kind, cand, src)
                length = layout.n_tokens(side)
                reason = None
                if length == 0:
                    if side == "candidate":
                        reason = "empty candidate: no tokens to score"
                    elif src is not None and self.formatter.tokens(src):
                        reason = "empty source after truncation to the model window"
                    else:
                        reason = "empty source: no tokens to score"
                elif kind == "cond" and src is not None and layout.n_tokens("source") == 0:
                    reason = (
                        "empty source: nothing to condition on"
                        if not self.formatter.tokens(src)
                        else "source truncated to nothing to fit the model window"
                    )
                masks = None
                if reason is None:
                    masks = self._masks_for(self._mask_seed_key(key, cand, src, side, user_ids), side, length)
                dirs.append(_Direction(j, kind, layout, side, masks, reason=reason))
        return dirs

    def _compute(self, cfg, uitems, todo, user_ids, token_scores, results, progress) -> None:
        dirs = self._directions(cfg, uitems, todo, user_ids)
        # Rows: one masked copy each. Identical rows (same input, same hidden positions) are forwarded once,
        # within an item (the t=1 masks) and across items (repeated texts, e.g. replicates under other ids).
        row_seq: list[tuple[int, ...]] = []
        row_pos: list[np.ndarray] = []
        row_items: list[set[int]] = []
        seen: dict[tuple, int] = {}
        for d in dirs:
            if d.masks is None:
                continue
            start = d.layout.span(d.side)[0]
            mask_row = np.empty(d.masks.n_masks, dtype=np.int64)
            for m in range(d.masks.n_masks):
                h = d.masks.hidden[m]
                key = (d.layout.ids, start, h.shape[0], np.packbits(h).tobytes())
                r = seen.get(key)
                if r is None:
                    r = len(row_seq)
                    seen[key] = r
                    row_seq.append(d.layout.ids)
                    row_pos.append(start + np.flatnonzero(h))
                    row_items.append(set())
                row_items[r].add(d.item)
                mask_row[m] = r
            d.mask_row = mask_row
        del seen
        row_lp: list[np.ndarray | None] = [None] * len(row_seq)
        # rows left per unique item, to write finished items to the run as soon as they complete
        left: dict[int, int] = {}
        for its in row_items:
            for it in its:
                left[it] = left.get(it, 0) + 1
        by_item: dict[int, list[_Direction]] = {}
        for d in dirs:
            by_item.setdefault(d.item, []).append(d)
        finished = [j for j in todo if left.get(j, 0) == 0]  # items with nothing to score (empty texts)
        self._finish(cfg, finished, by_item, uitems, row_lp, token_scores, results)

        self.rows_scored = len(row_seq)
        rows = [MaskedRow(ids, pos) for ids, pos in zip(row_seq, row_pos)]
        with progress_bar("DiffScore", len(row_seq), enabled=progress) as bar:
            # the tokenizer's rows (SCORING_VOCAB): the paper's p_theta is over its token vocabulary V (section 2)
            for scored in iter_scores(
                self.model, rows, batch_size=self.batch_size, max_tokens=self.max_tokens, vocab=SCORING_VOCAB
            ):
                done_now = []
                for r, lp in zip(scored.rows, scored.logprob, strict=True):
                    row_lp[r] = lp
                    for it in row_items[r]:
                        left[it] -= 1
                        if left[it] == 0:
                            done_now.append(it)
                self._finish(cfg, sorted(done_now), by_item, uitems, row_lp, token_scores, results)
                bar.update(len(scored.rows))

    def _text_warnings(self, cfg: str, item: tuple, warning: str | None) -> str | None:
        """Item warnings about the texts themselves: literal special-token strings (tokenized as plain text) and
        a high share of unknown tokens (the model cannot read the text; its score says little)."""
        _, cand, src, _ = item
        out = [warning] if warning else []
        texts = [("candidate", cand)] + ([("source", src)] if src is not None and cfg != "marginal" else [])
        for what, text in texts:
            sp = self.formatter.special_strings(text)
            if sp:
                out.append(f"{what} contains special-token text {', '.join(sp)} (scored as plain text)")
            n_unk, n = self.formatter.unk_count(text)
            if n and n_unk / n > UNK_WARN_RATE:
                out.append(f"{what}: {n_unk} of {n} tokens are unknown to the tokenizer")
        return "; ".join(out) or None

    def _report_texts(self, cfg: str, new: list[dict[str, Any]], warn) -> None:
        """One summary warning per kind of text problem."""
        for what, needle in (
            ("special-token text (scored as plain text)", "special-token text"),
            (f"more than {UNK_WARN_RATE:.0%} unknown tokens", "unknown to the tokenizer"),
        ):
            n = sum(1 for r in new if r.get("warning") and needle in r["warning"])
            if n:
                warn(f"{cfg}: {n} item(s) with {what} (see the 'warning' column)")

    def _report_truncation(self, cfg: str, new: list[dict[str, Any]], warn) -> None:
        """One summary warning per kind of cut."""
        window = int(self.model.max_length)
        for what in ("source", "candidate"):
            n = sum(1 for r in new if r.get("warning") and f"{what} truncated" in r["warning"])
            if n:
                warn(
                    f"{cfg}: {n} {what}(s) truncated from the end to fit the model window of {window} tokens "
                    "(see the 'warning' column)"
                )

    def _finish(self, cfg, items, by_item, uitems, row_lp, token_scores, results) -> None:
        for j in items:
            for d in by_item[j]:
                if d.masks is not None:
                    self._aggregate_direction(d, row_lp)
            res = self._combine(cfg, by_item[j], token_scores)
            results[j] = res
            res["warning"] = self._text_warnings(cfg, uitems[j], res.get("warning"))

    def _aggregate_direction(self, d: _Direction, row_lp) -> None:
        masks = d.masks
        n, length = masks.hidden.shape
        lp = np.full((n, length), np.nan)
        for m in range(n):
            lp[m, masks.hidden[m]] = row_lp[d.mask_row[m]]
        d.token_lp = lp
        full = None if masks.control is None else lp[masks.control]
        d.values = mask_values(np.nansum(lp, axis=1), masks, self.spec, full)

    # ------------------------------------------------------------------ aggregation
    def _summary(self, values: np.ndarray, masks: MaskSet) -> tuple[float, float, list[float]]:
        """score (the weighted sum of the per-mask values), standard error and profile from per-mask values."""
        score = float(np.dot(masks.weights(), values)) if masks.weight is not None else float(np.mean(values))
        T = self.spec.n_rates
        if self.spec.scheme == "pll":
            return score, 0.0, []
        if not has_rate_profile(self.spec.scheme):
            # a stratified mask at rate t_k may cover only part of that rate's sizes: the per-rate means are not
            # S(t_k) in expectation (only their weighted sum, the score, is), so none is reported
            return score, _stratified_se(values, masks), self._nan_profile()
        profile = [
            float(np.mean(values[masks.rate_index == k])) if np.any(masks.rate_index == k) else math.nan
            for k in range(T)
        ]
        return score, _stratified_se(values, masks), profile

    def _combine(self, cfg: str, dirs: list[_Direction], token_scores: bool) -> dict[str, Any]:
        warn = "; ".join(w for d in dirs for w in d.layout.warnings) or None
        per: dict[str, dict[str, Any]] = {}
        for d in dirs:
            if d.masks is None:
                per[d.kind] = {"score": math.nan, "se": math.nan, "profile": self._nan_profile(), "n": 0}
            else:
                s, se, prof = self._summary(d.values, d.masks)
                per[d.kind] = {"score": s, "se": se, "profile": prof, "n": d.masks.length}
            per[d.kind]["n_masks"] = 0 if d.masks is None else d.masks.n_masks
            per[d.kind]["reason"] = d.reason
        reasons = [f"{d.kind}: {d.reason}" if len(dirs) > 1 else d.reason for d in dirs if d.reason]
        out: dict[str, Any] = {"reason": "; ".join(reasons) or None, "warning": warn}
        if len(dirs) == 1:
            p = per[dirs[0].kind]
            out.update(
                score=p["score"], se=p["se"], profile=p["profile"], n_tokens=p["n"], n_masks=p["n_masks"]
            )
        else:
            a, b = dirs
            pa, pb = per[a.kind], per[b.kind]
            if cfg == "bidir":
                score = 0.5 * (pa["score"] + pb["score"])
                se = 0.5 * math.sqrt(pa["se"] ** 2 + pb["se"] ** 2)
                prof = [0.5 * (x + y) for x, y in zip(pa["profile"], pb["profile"], strict=True)]
            else:  # pmi = cond - marginal, mask by mask when the masks are shared
                coupled = (
                    a.masks is not None
                    and b.masks is not None
                    and a.masks.hidden.shape == b.masks.hidden.shape
                    and bool(np.array_equal(a.masks.hidden, b.masks.hidden))
                )
                if coupled:
                    score, se, prof = self._summary(a.values - b.values, a.masks)
                else:
                    score = pa["score"] - pb["score"]
                    se = math.sqrt(pa["se"] ** 2 + pb["se"] ** 2)
                    prof = [x - y for x, y in zip(pa["profile"], pb["profile"], strict=True)]
                out["coupled"] = coupled
            if a.reason or b.reason:
                score, se, prof = math.nan, math.nan, self._nan_profile()
            out.update(
                score=score, se=se, profile=prof, n_tokens=pa["n"], n_masks=pa["n_masks"] + pb["n_masks"]
            )
            for d in dirs:
                out[f"score_{d.kind}"] = per[d.kind]["score"]
                out[f"se_{d.kind}"] = per[d.kind]["se"]
                out[f"n_tokens_{d.kind}"] = per[d.kind]["n"]
        if token_scores:
            suffix = len(dirs) > 1
            for d in dirs:
                out.update(self._token_fields(d, f"_{d.kind}" if suffix else ""))
            if cfg == "pmi" and out.get("coupled"):
                out["token_pmi"] = [
                    x - y
                    for x, y in zip(out["token_logprob_cond"], out["token_logprob_marginal"], strict=True)
                ]
        return out

    def _nan_profile(self) -> list[float]:
        return [] if self.spec.scheme == "pll" else [math.nan] * self.spec.n_rates

    def _token_fields(self, d: _Direction, sfx: str) -> dict[str, Any]:
        a, b = d.layout.span(d.side)
        ids = list(d.layout.ids[a:b])
        toks = [str(t) for t in self.model.tokenizer.convert_ids_to_tokens(ids)] if ids else []
        if d.masks is None:
            return {f"tokens{sfx}": toks, f"token_logprob{sfx}": [], f"token_rate_logprob{sfx}": []}
        lp = d.token_lp
        with np.errstate(invalid="ignore"):
            per_tok = _nanmean(lp, axis=0)
            by_rate = []
            if self.spec.scheme != "pll":
                none = [math.nan] * lp.shape[1]
                for k in range(self.spec.n_rates):
                    sel = d.masks.rate_index == k
                    # the stratified schemes: not a per-rate estimate (see _summary)
                    ok = sel.any() and has_rate_profile(self.spec.scheme)
                    by_rate.append(_nanmean(lp[sel], axis=0).tolist() if ok else none)
        return {
            f"tokens{sfx}": toks,
            f"token_logprob{sfx}": per_tok.tolist(),
            f"token_rate_logprob{sfx}": by_rate,
        }


def _nanmean(x: np.ndarray, axis: int) -> np.ndarray:
    # np.nanmean warns on all-NaN slices; a token no mask hid gets NaN silently
    cnt = np.sum(~np.isnan(x), axis=axis)
    tot = np.nansum(x, axis=axis)
    return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)


def _stratified_se(values: np.ndarray, masks: MaskSet) -> float:
    """Standard error of the score ``sum_j w_j values_j`` (``w``: :meth:`MaskSet.weights`, ``1 / K`` each for the
    plain mean) from sampling units within strata.

    Units (a complementary pair, or one mask) of one stratum are treated as independent draws; for the balanced
    and stratified schemes the units of a stratum are negatively correlated (one permutation, stratified points),
    so this is conservative. A stratum with a single unit gives NaN unless its masks hide every token (no
    randomness).
    """
    wv = masks.weights() * values
    var = 0.0
    for s in np.unique(masks.stratum):
        sel = masks.stratum == s
        units = masks.unit[sel]
        uids = np.unique(units)
        sums = np.array([wv[sel][units == u].sum() for u in uids])
        if len(uids) < 2:
            if masks.hidden[sel].all():
                continue
            return math.nan
        var += len(uids) * float(np.var(sums, ddof=1))
    return math.sqrt(var)
