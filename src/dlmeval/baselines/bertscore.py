"""BERTScore (Zhang et al. 2020) through its authors' package, ``bert-score``.

:class:`BERTScore` wraps :class:`bert_score.BERTScorer`: the encoder (a local directory or a cached hub id), the
layer (default: the package's tuned layer for a known model, e.g. 17 for roberta-large; else the last layer), IDF
weights from a list of reference texts (optional), and baseline rescaling when the package ships (or the user
gives) the baseline file of that model. The DiffScore paper's BERTScore is BARTScore's setting: roberta-large,
layer 17, ``idf=False``, rescaled with the shipped baseline (BARTScore's ``SUM/score.py``), which is the default
here whenever roberta-large is on this machine; otherwise the MiniLM encoder shipped with dlmeval stands in (the
CPU demo; its label says so).

Several references: bert-score's own rule, the best reference per P, R and F (``BERTScorer.score`` with a list of
references per candidate). bert-score truncates a text to the encoder's window (512 tokens for roberta-large); a
candidate or reference longer than that is counted in :attr:`BERTScore.truncated` so the caller can warn.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dlmeval.errors import InputError

PAPER_MODEL = "roberta-large"
PAPER_HUB_IDS = ("FacebookAI/roberta-large", "roberta-large")


def baseline_file(name: str, lang: str = "en") -> Path | None:
    """The rescaling baseline bert-score ships for model ``name`` (its hub name, e.g. ``roberta-large``)."""
    import bert_score

    p = Path(bert_score.__file__).parent / "rescale_baseline" / lang / f"{name}.tsv"
    return p if p.is_file() else None


def tuned_layer(name: str) -> int | None:
    """bert-score's tuned layer for a known model name (None for an unknown one)."""
    from bert_score.utils import model2layers

    return model2layers.get(name)


class BERTScore:
    """bert-score's scorer over a local checkpoint directory.

    ``name`` is the model's hub name (it selects the tuned layer and the rescaling baseline); ``layer=None`` takes
    the tuned layer or the last one; ``rescale``: None = when a baseline file exists, True = required, False = off.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        name: str | None = None,
        layer: int | None = None,
        idf: bool = False,
        rescale: bool | None = None,
        baseline: str | Path | None = None,
        device: str | None = None,
        batch_size: int = 16,
        demo: bool = False,
    ):
        from bert_score import BERTScorer
        from transformers import AutoConfig

        from dlmeval.models.base import resolve_device

        self.directory = Path(directory)
        self.name = name or self.directory.name
        cfg = AutoConfig.from_pretrained(str(self.directory), local_files_only=True)
        n_layers = int(getattr(cfg, "num_hidden_layers", 0) or 0)
        self.layer = int(layer if layer is not None else (tuned_layer(self.name) or n_layers))
        if not 0 <= self.layer <= n_layers:
            raise InputError(
                f"--bertscore-layer {self.layer} is out of range for the {n_layers}-layer {self.name}"
            )
        self.idf = bool(idf)
        base = Path(baseline) if baseline is not None else baseline_file(self.name)
        if rescale is True and (base is None or not base.is_file()):
            raise InputError(
                f"BERTScore rescaling: no baseline file for {self.name}; pass one (bert-score's format)"
            )
        self.rescale = bool(rescale is not False and base is not None and base.is_file())
        self.baseline = base if self.rescale else None
        self.demo = demo
        self.batch_size = int(batch_size)
        self.device = resolve_device(device)
        self.scorer = BERTScorer(
            model_type=str(self.directory),
            num_layers=self.layer,
            idf=False,  # IDF weights are set per benchmark by set_idf
            lang="en",
            rescale_with_baseline=self.rescale,
            baseline_path=str(self.baseline) if self.baseline else None,
            device=self.device,
            nthreads=0,  # no worker pool (bert-score's default forks 4 processes for the IDF counts)
            batch_size=self.batch_size,
        )
        self.window = int(self.scorer._tokenizer.model_max_length)
        self.truncated = 0

    # ------------------------------------------------------------------ settings
    @property
    def label(self) -> str:
        bits = [
            f"{self.name} L{self.layer}",
            "idf" if self.idf else None,
            "rescaled" if self.rescale else None,
        ]
        lab = ", ".join(b for b in bits if b)
        return lab + (", CPU demo: not the paper's roberta-large" if self.demo else "")

    def identity(self) -> dict:
        from dlmeval.baselines.checkpoints import weights_digest
        from dlmeval.data.paths import file_digest

        return {
            "name": self.name,
            "family": "bert-score",
            "layer": self.layer,
            "weights_sha256": weights_digest(self.directory),
            "baseline": file_digest(self.baseline) if self.baseline else None,
        }

    def configuration(self) -> dict:
        import bert_score

        return {
            "package": f"bert-score {bert_score.__version__}",
            "model": self.name,
            "layer": self.layer,
            "idf": self.idf,
            "rescale": self.rescale,
            "multi_reference": "best reference (bert-score)",
        }

    def set_idf(self, references: Sequence[str]) -> None:
        """IDF weights from ``references`` (bert-score's ``get_idf_dict``: log((N + 1) / (df + 1)))."""
        from bert_score.utils import get_idf_dict

        if not self.idf:
            return
        refs = list(references)
        if not refs:
            raise InputError("BERTScore IDF needs at least one reference text")
        self.scorer._idf_dict = get_idf_dict(refs, self.scorer._tokenizer, nthreads=0)
        self.scorer._idf = True

    # ------------------------------------------------------------------ scores
    def _count_truncated(self, texts: Sequence[str]) -> None:
        from bert_score.utils import sent_encode

        tok = self.scorer._tokenizer
        self.truncated += sum(len(sent_encode(tok, t)) >= self.window for t in texts)

    def score(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> list[tuple[float, float, float]]:
        """``(P, R, F)`` of each candidate against its best reference (bert-score's own multi-reference rule)."""
        cands = list(candidates)
        refs = [list(dict.fromkeys(r)) if not isinstance(r, str) else [r] for r in references]
        if len(refs) != len(cands) or any(not r for r in refs):
            raise InputError("BERTScore needs one non-empty list of references per candidate")
        self._count_truncated([*cands, *{t for r in refs for t in r}])
        import bert_score.scorer as bs_scorer

        # bert-score embeds the distinct texts in batches ordered by word count, ties in set() order, which follows
        # the process's string-hash seed: two processes padded different batches and BERTScore moved in the last
        # bits under one run id (a 1-rank vs 2-rank meta-eval differed). The same computation with ties broken by
        # the text itself: bert-score's own pieces, only the order fixed (no library option does it).
        original = bs_scorer.bert_cos_score_idf
        bs_scorer.bert_cos_score_idf = _cos_score_idf_ordered
        try:
            p, r, f = self.scorer.score(cands, refs, batch_size=self.batch_size)
        finally:
            bs_scorer.bert_cos_score_idf = original
        return [(float(a), float(b), float(c)) for a, b, c in zip(p.tolist(), r.tolist(), f.tolist())]


def _cos_score_idf_ordered(
    model, refs, hyps, tokenizer, idf_dict, verbose=False, batch_size=64, device="cpu", all_layers=False
):
    """``bert_score.utils.bert_cos_score_idf`` with the distinct texts sorted by (word count descending, text):
    embeddings of each text in batches of ``batch_size``, then greedy matching per pair, as the library does."""
    import torch
    from bert_score.utils import get_bert_embedding, greedy_cos_idf
    from torch.nn.utils.rnn import pad_sequence

    texts = sorted(set(refs) | set(hyps), key=lambda t: (-len(t.split(" ")), t))
    stats = {}
    for b in range(0, len(texts), batch_size):
        batch = texts[b : b + batch_size]
        embs, masks, idf = get_bert_embedding(
            batch, model, tokenizer, idf_dict, device=device, all_layers=all_layers
        )
        embs, masks, idf = embs.cpu(), masks.cpu(), idf.cpu()
        for i, t in enumerate(batch):
            n = int(masks[i].sum().item())
            stats[t] = (embs[i, :n], idf[i, :n])
    dev = next(model.parameters()).device

    def padded(batch):
        emb = [stats[t][0].to(dev) for t in batch]
        idf = [stats[t][1].to(dev) for t in batch]
        lens = torch.tensor([e.size(0) for e in emb], dtype=torch.long)
        mask = torch.arange(int(lens.max())).expand(len(lens), -1) < lens.unsqueeze(1)
        return (
            pad_sequence(emb, batch_first=True, padding_value=2.0),
            mask.to(dev),
            pad_sequence(idf, batch_first=True),
        )

    preds = []
    with torch.no_grad():
        for b in range(0, len(refs), batch_size):
            p, r, f = greedy_cos_idf(
                *padded(refs[b : b + batch_size]), *padded(hyps[b : b + batch_size]), all_layers
            )
            preds.append(torch.stack((p, r, f), dim=-1).cpu())
    return torch.cat(preds, dim=1 if all_layers else 0)


def load_bertscore(
    spec: str | None = None,
    *,
    fallback: str | Path | None = None,
    allow_download: bool = False,
    **kw,
) -> BERTScore:
    """BERTScore over ``spec`` (a directory or hub id; None: the paper's roberta-large when it is on this machine,
    else ``fallback`` or the shipped MiniLM encoder, labelled as the CPU demo)."""
    from dlmeval.baselines.checkpoints import cached_snapshot, resolve_checkpoint

    if spec is not None:
        d = resolve_checkpoint(
            spec, allow_download=allow_download, what="BERTScore", option="--bertscore-model"
        )
        name = Path(str(spec)).name if Path(str(spec)).is_dir() else str(spec).rsplit("/", 1)[-1]
        return BERTScore(d, name=name, **kw)
    for repo in PAPER_HUB_IDS:
        d = cached_snapshot(repo, allow_download=allow_download)
        if d is not None:
            return BERTScore(d, name=PAPER_MODEL, **kw)
    if fallback is not None:
        return BERTScore(Path(fallback), demo=True, **kw)
    from dlmeval.baselines.embedding import ENCODER_NAME
    from dlmeval.models.default import minilm_dir

    return BERTScore(minilm_dir(), name=ENCODER_NAME, demo=True, **kw)
