"""Tiny stand-ins written as checkpoint directories laid out like the released ones and loaded by the families' own
loaders, so every test on them runs through the real load path (as :mod:`dlmeval.models.standins` does for
LLaDA and Dream): the building and training shared by the AR-converted, encoder and MoE families (A2D MDLM /
BD3LM, DiffuLLaMA, BERT-Chat, LLaDA-MoE). What a directory holds is the family's own, in its module
(:class:`CheckpointStandin`: its tokenizer and config, its network, its adapter and loader, registered with
:func:`register_checkpoint_standin`); this module imports no family.

=================  ==========================================================================================
stand-in           what the directory is
=================  ==========================================================================================
``tiny-a2d``       ``model_type: a2d-qwen2`` (dllm's converted Qwen2: q/k/v biases), a Qwen-style tokenizer with
                   ``<|mask|>`` as mask token and an ``<|im_start|>`` / ``<|im_end|>`` chat template
``tiny-a2d-qwen3`` ``model_type: a2d-qwen3`` (per-head q/k RMSNorm, no biases), the same tokenizer
``tiny-a2d-bd3lm`` the ``a2d-qwen2`` layout, trained block-causally (blocks of 4), loaded as ``a2d-bd3lm:``
``tiny-diffullama`` ``model_type: llama`` (DiffuLLaMA ships plain LLaMA weights), a LLaMA-style tokenizer that adds
                   BOS, with ``[MASK]`` added as mask token; trained with DiffuLLaMA's shift (output ``i - 1``
                   predicts token ``i``)
``tiny-bert-chat`` ``model_type: modernbert`` (ModernBERT masked LM), a BERT tokenizer whose EOS is ``[PAD]`` (as
                   dllm's ``get_tokenizer`` sets it) and dllm's BERT-Chat chat template
``tiny-lladamoe``  ``model_type: lladamoe`` with ``auto_map`` and dlmeval's own MoE code
                   (``assets/standins/modeling_tiny_lladamoe.py``: softmax top-k routing, a shared expert, a dense
                   first layer, per-head q/k norm), the ``<|mask|>`` / ``<|role_end|>`` tokenizer
=================  ==========================================================================================

Weights: seeded, then trained for a few seconds on the "successor" sequences of :mod:`dlmeval.models.standins`
through the family's own adapter (so with its alignment and attention), so that ``check-model`` can tell a right
shift or attention from a wrong one. Built once per (kind, seed, code) in the cache; the default ones (seed 0) ship
their weights (:mod:`dlmeval.models.standin_weights`), so they are the same bytes on every machine.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlmeval.models.standins import ASSETS, cached_checkpoint, words
from dlmeval.models.tiny import register_standin

if TYPE_CHECKING:  # torch loads when a model is used, not when the layer is imported (#36)
    import torch

BUILD_VERSION = 1
TRAIN_STEPS = 120


@dataclass(frozen=True)
class CheckpointStandin:
    """A family's stand-in ``kind``, as its module registers it (:func:`register_checkpoint_standin`).

    ``files(kind, out, hidden, layers)`` writes the tokenizer (and any code files) into the directory ``out`` and
    returns ``(tokenizer, vocab, config dict, mask id, start ids)`` (``start``: the ids every training row begins
    with, BOS / [CLS]); ``module(kind, out, config)`` a freshly initialised network of that config (called under
    the stand-in's seed); ``adapter`` the class it is trained through; ``load(path, *, device, dtype, name)`` the
    family's loader; ``logits(model, ids)`` the training forward where it is not the adapter's plain one (BD3LM:
    block-causal); ``source`` and ``code_files`` (under ``assets/standins``) are hashed into the cache key."""

    files: Callable[..., tuple]
    module: Callable[..., Any]
    adapter: type
    load: Callable[..., Any]
    logits: Callable[..., torch.Tensor] | None = None
    source: str = ""
    code_files: tuple[str, ...] = ()


#: kind -> its family's stand-in, registered by the family's module
_STANDINS: dict[str, CheckpointStandin] = {}


def register_checkpoint_standin(kind: str, standin: CheckpointStandin) -> None:
    """Register stand-in ``kind`` (``tiny-<kind>``) and its builder for :func:`dlmeval.models.tiny.tiny_model`."""
    _STANDINS[kind] = standin
    register_standin(kind, functools.partial(load_family_standin, kind))


def kinds() -> tuple[str, ...]:
    """The registered checkpoint stand-ins (every family module imported first)."""
    from dlmeval.models.family import load_families

    load_families()  # the family modules register their stand-ins on import
    return tuple(_STANDINS)


def _standin(kind: str) -> CheckpointStandin:
    if kind not in _STANDINS and kind not in kinds():
        raise ValueError(f"no stand-in for {kind!r}; choose one of {', '.join(_STANDINS)}")
    return _STANDINS[kind]


def _code_hash() -> str:
    h = hashlib.sha256(f"{BUILD_VERSION}:{TRAIN_STEPS}".encode())
    h.update(" ".join(words()).encode())
    for kind in sorted(kinds()):
        st = _STANDINS[kind]
        for f in st.code_files:
            h.update((ASSETS / f).read_bytes())
        if st.source:
            h.update(Path(st.source).read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:12]


def _module_and_adapter(kind: str, out: Path, cfg: dict, tok, mask: int, seed: int):
    """A freshly initialised module of ``cfg`` (seeded) wrapped in the family adapter, for training."""
    import torch

    from dlmeval.models.base import DiffusionLM

    fam = _standin(kind)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = fam.module(kind, out, cfg)
    cls = fam.adapter
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    m: DiffusionLM = cls(
        module,
        tok,
        name="build",
        source=str(out),
        mask_token_id=mask,
        max_length=128,
        device=torch.device("cpu"),
        dtype=torch.float32,
        eos_token_ids=eos,
        bos_token_id=tok.bos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else mask,
    )
    return module, m


def _train(m, kind: str, words: list[int], *, mask: int, start: list[int], seed: int) -> None:
    """Masked-token training on successor sequences through the adapter (its alignment and attention; the
    family's ``logits`` where it trains otherwise, BD3LM block-causally)."""
    import torch

    logits = _standin(kind).logits
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(m.module.parameters(), lr=3e-3, weight_decay=0.0)
    w = torch.tensor(words)
    n = 16 - len(start)
    m.module.train()
    for _ in range(TRAIN_STEPS):
        s = torch.randint(0, len(words), (32, 1), generator=g)
        x0 = w[(s + torch.arange(n)) % len(words)]
        if start:
            x0 = torch.cat([torch.tensor(start).expand(32, -1), x0], dim=1)
        rate = torch.rand(32, 1, generator=g) * 0.5 + 0.1
        masked = (torch.rand(x0.shape, generator=g) < rate) & (torch.arange(16) >= len(start))
        xt = torch.where(masked, torch.full_like(x0, mask), x0)
        if logits is not None:
            z = logits(m, xt)
        else:
            z = m.forward(xt, torch.ones_like(xt)).logits
        loss = torch.nn.functional.cross_entropy(z[masked], x0[masked])
        opt.zero_grad()
        loss.backward()
        opt.step()
    m.module.eval()


def _build(kind: str, out: Path, *, seed: int, layers: int, hidden: int, weights: bool = True) -> None:
    """Write the checkpoint directory; ``weights=False`` writes everything but ``model.safetensors``."""
    import torch

    from dlmeval.models.standins import single_thread

    tok, vocab, cfg, mask, start = _standin(kind).files(kind, out, hidden, layers)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    if not weights:
        return
    with single_thread():
        module, m = _module_and_adapter(kind, out, cfg, tok, mask, seed)
    with torch.random.fork_rng(devices=[]), single_thread():
        torch.manual_seed(seed)
        _train(m, kind, [vocab[w] for w in words()], mask=mask, start=start, seed=seed)
    module.save_pretrained(str(out), safe_serialization=True)
    (out / "config.json").write_text(
        json.dumps(cfg, indent=1)
    )  # keep the released layout (model_type, auto_map)
    gen = out / "generation_config.json"
    if gen.exists():
        gen.unlink()


def standin_dir(
    kind: str, *, seed: int = 0, layers: int = 2, hidden: int = 32, root: Path | None = None
) -> Path:
    """The checkpoint directory of stand-in ``kind`` (a registered one, :func:`kinds`), built on first use."""
    _standin(kind)
    return cached_checkpoint(_build, _code_hash, kind, seed, layers, hidden, str(root) if root else None)


def load_family_standin(kind: str, *, seed: int = 0, device=None, layers: int = 2, hidden: int = 32):
    """Build (once) and load stand-in ``kind`` through its family loader, as a real checkpoint loads."""
    path = str(standin_dir(kind, seed=seed, layers=layers, hidden=hidden))
    m = _standin(kind).load(path, device=device, dtype="float32", name=f"tiny-{kind}")
    m.source = f"tiny:{kind}:seed={seed}"
    return m
