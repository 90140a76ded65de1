"""AlignScore (Zha et al. 2023) as its authors score, ``evaluation_mode="nli_sp"`` (the default of their
``AlignScore`` class):

* the context is cut into chunks of whole sentences of about 350 words (``n_chunk = words // 350 + 1`` chunks,
  ``max(n_sentences // n_chunk, 1)`` sentences each), the claim into sentences;
* every (chunk, claim sentence) pair goes through the RoBERTa encoder as one pair input (``truncation="only_first"``,
  the tokenizer's window) and the 3-way alignment head; the score of a pair is the softmax probability of the
  "aligned" class (index 0) of the pooled output;
* the output's score is the mean over claim sentences of the max over chunks.

Checkpoints are Lightning ``.ckpt`` files (``AlignScore-large.ckpt`` over roberta-large): they are read with
``torch.load(weights_only=True)`` (tensors and plain containers only, never arbitrary pickled objects), and only
the ``base_model.*`` and ``tri_layer.*`` weights are used. A directory holding ``alignscore.safetensors`` with the
same keys works too. The base model (``--alignscore-base``, default roberta-large) provides the config and the
tokenizer. Written here because the ``alignscore`` package pins spaCy, pytorch-lightning 1.x and an old
transformers, which do not install beside the pinned stack; the inference is the few steps above.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from dlmeval.errors import InputError, ModelNotFoundError

BASE_MODEL = "roberta-large"
BASE_HUB_IDS = ("FacebookAI/roberta-large", "roberta-large")
CHUNK_WORDS = 350


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The weights of an AlignScore checkpoint (``.ckpt`` through ``torch.load(weights_only=True)``, or a
    directory / file in safetensors)."""
    p = Path(path)
    if p.is_dir():
        p = p / "alignscore.safetensors"
    if not p.is_file():
        raise ModelNotFoundError(f"AlignScore checkpoint {p} does not exist; pass --alignscore-model FILE")
    if p.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(p))
    try:
        obj = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as e:  # an object the restricted unpickler refuses: not loaded
        raise InputError(
            f"{p} is not a plain AlignScore checkpoint (weights_only load refused: {e})"
        ) from None
    sd = obj.get("state_dict", obj) if isinstance(obj, dict) else None
    if not isinstance(sd, dict):
        raise InputError(f"{p} holds no state_dict")
    return sd


def chunk_context(context: str, sentences: list[str]) -> list[str]:
    """AlignScore's chunks: whole sentences, about 350 words each."""
    n_chunk = len(context.strip().split()) // CHUNK_WORDS + 1
    per = max(len(sentences) // n_chunk, 1)
    return [" ".join(sentences[i : i + per]) for i in range(0, len(sentences), per)]


class AlignScorer:
    """RoBERTa encoder + AlignScore's 3-way alignment head."""

    def __init__(
        self,
        checkpoint: str | Path,
        base: str | Path,
        *,
        name: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
    ):
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        from dlmeval.models.base import resolve_device

        self.checkpoint = Path(checkpoint)
        self.name = name or self.checkpoint.stem
        self.device = resolve_device(device)
        self.batch_size = int(batch_size)
        cfg = AutoConfig.from_pretrained(str(base), local_files_only=True)
        self.tokenizer = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
        sd = read_state_dict(checkpoint)
        enc = {k.removeprefix("base_model."): v for k, v in sd.items() if k.startswith("base_model.")}
        if "tri_layer.weight" not in sd or not enc:
            raise InputError(
                f"{checkpoint} has no base_model.* / tri_layer.* weights: not an AlignScore checkpoint"
            )
        self.encoder = AutoModel.from_config(cfg, add_pooling_layer=True)
        missing, unexpected = self.encoder.load_state_dict(enc, strict=False)
        missing = [k for k in missing if not k.endswith("position_ids")]
        if missing:
            raise InputError(
                f"{checkpoint}: the encoder weights lack {missing[:3]}... (wrong --alignscore-base?)"
            )
        self.head = torch.nn.Linear(cfg.hidden_size, 3)
        self.head.load_state_dict({"weight": sd["tri_layer.weight"], "bias": sd["tri_layer.bias"]})
        self.encoder.to(self.device).eval()
        self.head.to(self.device).eval()
        self.window = int(min(self.tokenizer.model_max_length, cfg.max_position_embeddings))
        self.truncated = 0

    def identity(self) -> dict:
        from dlmeval.data.paths import file_digest

        f = self.checkpoint / "alignscore.safetensors" if self.checkpoint.is_dir() else self.checkpoint
        return {"name": self.name, "family": "alignscore", "weights_sha256": file_digest(f)}

    @torch.no_grad()
    def aligned(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[float]:
        """p(aligned) of each (premise, hypothesis) pair."""
        out: list[float] = []
        for s in range(0, len(premises), self.batch_size):
            pre, hyp = list(premises[s : s + self.batch_size]), list(hypotheses[s : s + self.batch_size])
            full = self.tokenizer(pre, hyp)["input_ids"]
            self.truncated += sum(len(x) > self.window for x in full)
            enc = self.tokenizer(
                pre, hyp, truncation="only_first", padding=True, max_length=self.window, return_tensors="pt"
            ).to(self.device)
            pooled = self.encoder(**enc).pooler_output
            out += torch.softmax(self.head(pooled).float(), dim=-1)[:, 0].tolist()
        return out

    def score(self, contexts: Sequence[str], claims: Sequence[str]) -> list[float]:
        """AlignScore (nli_sp) of each claim given its context."""
        from dlmeval.baselines.sentences import split_sentences

        pre, hyp, shape = [], [], []
        for ctx, claim in zip(contexts, claims):
            chunks = chunk_context(ctx, split_sentences(ctx) if ctx.strip() else [""])
            sents = split_sentences(claim)
            shape.append((len(chunks), len(sents)))
            for c in chunks:
                for h in sents:
                    pre.append(c)
                    hyp.append(h)
        flat = self.aligned(pre, hyp)
        out, at = [], 0
        for n_c, n_s in shape:
            m = torch.tensor(flat[at : at + n_c * n_s]).view(n_c, n_s)
            out.append(float(m.max(dim=0).values.mean()))
            at += n_c * n_s
        return out


def load_alignscore(checkpoint: str | None, base: str | None = None, *, allow_download: bool = False, **kw):
    """An :class:`AlignScorer` (the checkpoint file is never fetched: AlignScore's are GitHub-release files)."""
    from dlmeval.baselines.checkpoints import resolve_checkpoint

    if checkpoint is None:
        raise ModelNotFoundError(
            "AlignScore: no checkpoint; pass --alignscore-model FILE (AlignScore-large.ckpt from the AlignScore "
            "release) and --alignscore-base (roberta-large)"
        )
    b = resolve_checkpoint(
        base,
        defaults=BASE_HUB_IDS,
        allow_download=allow_download,
        what="AlignScore base model",
        option="--alignscore-base",
    )
    return AlignScorer(checkpoint, b, **kw)
