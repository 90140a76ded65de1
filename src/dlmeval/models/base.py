"""The one interface every diffusion LM family is seen through.

Everything above ``dlmeval.models`` talks to a :class:`DiffusionLM` (or a :class:`dlmeval.models.causal.CausalLM`)
and never to a family. The quirks live in the adapters:

* which token id is the mask, which ids end a text (EOS / EoT),
* padding side,
* logit alignment: Dream-style models predict token ``i`` from the output at ``i - 1``
  (``logit_shift = 1``); the base class re-aligns so that position ``i`` always scores token ``i``,
* how to split the network into "trunk" (hidden states) and "head" (vocabulary projection), so that the
  memory-lean path can project only the requested positions.

Every forward pass increments :attr:`DiffusionLM.nfe` by one, and :attr:`DiffusionLM.rows_forwarded` by the batch
size. Protocols read NFE from this counter and never compute it by hand.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dlmeval.errors import InputError
from dlmeval.models.devices import (  # noqa: F401  (re-exported: their home was this module)
    DEVICE_MAPS,
    device_map_of,
    no_grad,
    place,
    place_kwargs,
    resolve_device,
    resolve_dtype,
)
from dlmeval.models.family import family_of

if TYPE_CHECKING:  # torch loads when a model is used, not when the layer is imported (#36)
    import torch
    from torch import nn


@dataclass
class RunOut:
    """What an adapter's trunk returns: either the last hidden state (then ``head`` projects it) or full logits."""

    last_hidden: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None

    @classmethod
    def of(cls, out: Any, output_hidden_states: bool, *, trunk: bool = False) -> RunOut:
        """From a network's output: its ``logits`` (``trunk``: its ``last_hidden_state``, for ``_head``) and its
        ``hidden_states`` when they were asked for."""
        hs = out.hidden_states if output_hidden_states else None
        if trunk:
            return cls(last_hidden=out.last_hidden_state, hidden_states=hs)
        return cls(logits=out.logits, hidden_states=hs)


def one_input(
    input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, **kw: Any
) -> dict[str, Any]:
    """The keywords ``kw`` of a network call plus exactly one input: ``inputs_embeds`` when given, else
    ``input_ids`` (remote code refuses a keyword it does not take, even as None: LLaDA's forward)."""
    if inputs_embeds is not None:
        kw["inputs_embeds"] = inputs_embeds
    else:
        kw["input_ids"] = input_ids
    return kw


@dataclass
class ForwardOut:
    logits: torch.Tensor  # float32 [B, L, V], position i scores token i
    hidden_states: tuple[torch.Tensor, ...] | None = None


@dataclass
class PositionScores:
    """Scores at selected positions, flattened in row-major (batch, position) order."""

    batch_index: torch.Tensor  # [N]
    position: torch.Tensor  # [N]
    logprob: torch.Tensor  # [N] float32: log p(target | input) at that position
    entropy: torch.Tensor | None = None  # [N] float32, nats
    top_ids: torch.Tensor | None = None  # [N, k]
    top_logprobs: torch.Tensor | None = None  # [N, k]
    max_logprob: torch.Tensor | None = None  # [N] log of the largest probability


@dataclass
class ModelIdentity:
    name: str
    family: str
    source: str
    weights_sha256: str
    dtype: str
    device: str
    mask_token_id: int | None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {
            "name": self.name,
            "family": self.family,
            "source": self.source,
            "weights_sha256": self.weights_sha256,
            "dtype": self.dtype,
            "device": self.device,
        }
        if self.mask_token_id is not None:
            d["mask_token_id"] = self.mask_token_id
        d.update(self.extra)
        return d


def state_dict_sha256(module: nn.Module) -> str:
    """A content hash of a module's parameters and buffers (name, dtype, shape, bytes), independent of file format."""
    import torch

    h = hashlib.sha256()
    seen: set[int] = set()
    for name, t in sorted(module.state_dict().items()):
        if t.data_ptr() in seen and t.numel() > 0:
            continue  # tied weights are hashed once
        seen.add(t.data_ptr())
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def model_identity(model: Any, dtype: Any, mask_token_id: int | None = None, extra=None) -> ModelIdentity:
    """The :class:`ModelIdentity` of a model (``name``, ``family``, ``source``, ``module``, ``device``): its weights
    hashed once and kept in ``model._sha`` (None: not yet hashed), ``dtype`` without the ``torch.`` prefix."""
    if model._sha is None:
        model._sha = state_dict_sha256(model.module)
    return ModelIdentity(
        model.name,
        model.family,
        model.source,
        model._sha,
        str(dtype).replace("torch.", ""),
        model.device.type,
        mask_token_id,
        dict(extra or {}),
    )


class _TokenizerMixin:
    """Tokenization and padding shared by the diffusion and causal interfaces."""

    tokenizer: Any
    padding_side: str
    pad_token_id: int
    device: torch.device
    max_length: int

    #: add the tokenizer's BOS when encoding with special tokens if the tokenizer does not (Dream: its first text
    #: token is then scored from a real preceding position)
    prepend_bos: bool = False

    def _bos(self) -> int | None:
        b = getattr(self, "bos_token_id", None)
        return b if b is not None else getattr(self.tokenizer, "bos_token_id", None)

    def _bos_fixed(self, ids: list[int], add_special_tokens: bool) -> tuple[list[int], int]:
        """``(ids, change)``: one of two leading BOS dropped (a chat template that starts with BOS, encoded by a
        tokenizer that adds one; change -1) or BOS prepended (``prepend_bos``; change +1)."""
        bos = self._bos()
        if not add_special_tokens or bos is None:
            return ids, 0
        if len(ids) >= 2 and ids[0] == bos and ids[1] == bos:
            return ids[1:], -1
        if self.prepend_bos and (not ids or ids[0] != bos):
            return [int(bos), *ids], 1
        return ids, 0

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        if not isinstance(text, str):
            raise InputError(f"expected a string, got {type(text).__name__}")
        ids = [int(t) for t in self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]]
        return self._bos_fixed(ids, add_special_tokens)[0]

    def encode_with_offsets(
        self, text: str, *, add_special_tokens: bool = True
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of :meth:`encode` and each token's ``(start, end)`` character span in ``text`` (``(0, 0)`` for
        special tokens): the tokenizer's offsets when it is fast, incremental decoding otherwise."""
        if not isinstance(text, str):
            raise InputError(f"expected a string, got {type(text).__name__}")
        if getattr(self.tokenizer, "is_fast", False):
            enc = self.tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
            ids = [int(t) for t in enc["input_ids"]]
            offs = [(int(a), int(b)) for a, b in enc["offset_mapping"]]
        else:
            from dlmeval.models.tokens import char_spans

            ids = [int(t) for t in self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]]
            offs = char_spans(self.tokenizer, text, ids)
        fixed, change = self._bos_fixed(ids, add_special_tokens)
        if change < 0:
            offs = offs[1:]
        elif change > 0:
            offs = [(0, 0), *offs]
        return fixed, offs

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def pad(
        self, seqs: Sequence[Sequence[int]], *, length: int | None = None, side: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pad id lists into ``(input_ids, attention_mask)`` on the model's device, on ``side`` (default: the
        family's padding side)."""
        import torch

        side = side or self.padding_side
        if side not in ("left", "right"):
            raise InputError(f"padding side must be 'left' or 'right', got {side!r}")
        if not seqs:
            raise InputError("cannot pad an empty batch")
        width = max(len(s) for s in seqs) if length is None else length
        ids = torch.full((len(seqs), width), self.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            n = len(s)
            if n > width:
                raise InputError(f"sequence of {n} tokens does not fit a width of {width}")
            if n == 0:
                continue
            if side == "left":
                ids[i, width - n :] = torch.as_tensor(list(s), dtype=torch.long)
                attn[i, width - n :] = 1
            else:
                ids[i, :n] = torch.as_tensor(list(s), dtype=torch.long)
                attn[i, :n] = 1
        return ids.to(self.device), attn.to(self.device)

    def offset(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """Index of each row's first real token, read from the mask (so right and left padding both work)."""
        return attention_mask.long().argmax(dim=1)


def position_pairs(
    positions: torch.Tensor | tuple[torch.Tensor, torch.Tensor], shape: tuple[int, ...] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(batch_index, position)`` of a positions argument (:meth:`DiffusionLM.logits_at`): a pair of 1-d long
    tensors as given, or the ``nonzero()`` of a bool mask (of ``shape`` when given)."""
    import torch

    if isinstance(positions, tuple):
        bi, pi = positions
        if bi.shape != pi.shape or bi.dim() != 1:
            raise InputError("positions as (batch_index, position) needs two 1-d tensors of one length")
        return bi, pi
    if positions.dtype != torch.bool or (shape is not None and tuple(positions.shape) != shape):
        raise InputError(f"positions must be a boolean mask{f' of shape {shape}' if shape else ''}")
    bi, pi = positions.nonzero(as_tuple=True)
    return bi, pi


def block_causal_mask(
    attention_mask: torch.Tensor | None, shape, block_size: int, *, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask [B, 1, L, L] bool, position_ids [B, L])`` of block-causal attention (BD3LM, dllm's
    ``_prepare_for_sampling``): column ``j`` is in block ``j // block_size`` (physical columns, shared by the
    batch), a query sees the keys of its own block and of every block before it, padded columns are neither
    queries nor keys (a padded query sees itself only, so no row is all -inf); position ids count each row's real
    tokens from 0 (0 on padding)."""
    import torch

    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise InputError(f"block_size must be an integer >= 1, got {block_size!r}")
    b, n = int(shape[0]), int(shape[1])
    valid = (
        torch.ones(b, n, dtype=torch.bool, device=device) if attention_mask is None else attention_mask.bool()
    )
    blk = torch.arange(n, device=valid.device) // block_size
    mask = (
        (blk[None, None, None, :] <= blk[None, None, :, None])
        & valid[:, None, None, :]
        & valid[:, None, :, None]
    )
    mask = mask | torch.eye(n, dtype=torch.bool, device=valid.device)
    pos = torch.where(valid, valid.long().cumsum(-1) - 1, 0)
    return mask, pos


def length_sorted_batches(
    lengths: Sequence[int], *, batch_size: int | None = None, max_tokens: int | None = None
) -> Iterator[list[int]]:
    """Yield lists of indices, longest first (equal lengths in index order), so that padding is small.

    ``batch_size`` bounds the rows (16 when neither bound is given); ``max_tokens`` bounds ``rows * longest row``
    (a row longer than ``max_tokens`` is a batch of its own). The batches depend only on ``lengths`` and the two
    bounds, so the same inputs are cut the same way in any process, on any rank and on a resume.

    The batching is not free of numbers. A row's outputs equal its outputs alone only up to rounding: the batch's
    padded width shapes the reductions (tiny-llada float32 on the CPU, five rows of 4 to 31 tokens: 4 of 5 rows'
    logits differ from the row alone with one thread, 5 of 5 with two, by at most 2.4e-6), with two threads even
    the order of the rows in a batch moved a row by 1.4e-6 (none with one thread), and on a GPU the kernels also
    follow the row count (``benchmarks/bench_batch_bits.py``). Canonical chunks fix both the rows and their order.
    The batch-invariance tests (``tests/models/test_models.py``) hold to ``atol=1e-5``, not bit for bit; so
    ``batch_size`` / ``max_tokens`` belong in the signature of a run that stores records computed in these batches.
    """
    if batch_size is None and max_tokens is None:
        batch_size = 16
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batch: list[int] = []
    width = 0
    for i in order:
        w = max(width, lengths[i], 1)
        too_many_rows = batch_size is not None and len(batch) + 1 > batch_size
        too_many_tokens = max_tokens is not None and w * (len(batch) + 1) > max_tokens
        if batch and (too_many_rows or too_many_tokens):
            yield batch
            batch, w = [], max(lengths[i], 1)
        batch.append(i)
        width = w
    if batch:
        yield batch


class _PassCounts:
    """The forward-pass counters of the diffusion and causal interfaces: every call of the module adds one to
    ``nfe`` and its batch size to ``rows_forwarded`` (:meth:`_count`); protocols read NFE from them."""

    nfe: int
    rows_forwarded: int

    def reset_nfe(self) -> None:
        self.nfe = 0
        self.rows_forwarded = 0

    def _count(self, batch: int) -> None:
        """Count one forward call of the module over ``batch`` rows."""
        self.nfe += 1
        self.rows_forwarded += batch


class DiffusionLM(_TokenizerMixin, _PassCounts):
    """A masked diffusion LM (or any bidirectional masked LM) behind one interface.

    Subclasses implement :meth:`_run` (the trunk) and, when the trunk returns hidden states, :meth:`_head`.
    """

    family: str = "abstract"
    #: 1 for Dream-style models whose output at i-1 predicts token i; the base class re-aligns. This and
    #: ``native_schedule`` / ``prepend_bos`` / the padding side are set per instance from the registered
    #: :class:`~dlmeval.models.family.Family` of ``family`` (these class values serve unregistered adapters)
    logit_shift: int = 0
    #: whether the network takes the masking level as an input; if not, a step that changes no token is a no-op.
    time_conditioned: bool = False
    #: whether the trunk takes an explicit 4-D attention mask (:meth:`_run_4d`), so ``logits_at(block_size=)``
    #: can run it block-causally (block diffusion)
    block_attention: bool = False
    #: the block size a block-diffusion family was trained with (its sampler's default), or None
    block_size: int | None = None
    #: chat prompts as the family's own code builds them (#34): extra variables of its chat template
    #: (dllm's Qwen A2D tokenizers: ``enable_thinking=False``), whether the templated text is encoded with the
    #: tokenizer's special tokens (dllm: ``apply_chat_template(tokenize=True)``, which adds none), and text
    #: markers that end an answer (dllm's ``eot_token`` where it is text, not one token: BERT-Chat's ``[/Answer]``)
    chat_kwargs: dict = {}
    chat_special_tokens: bool = True
    answer_end: tuple[str, ...] = ()

    def encode_chat(self, text: str) -> list[int]:
        """Token ids of a chat-templated prompt, as the family's own code encodes it."""
        return self.encode(text, add_special_tokens=self.chat_special_tokens)

    #: the unmasking schedule of the family's own sampler (``dlmeval.sampling.SCHEDULES``): the sampler's
    #: default for strategies that never re-mask
    native_schedule: str = "linear"
    #: the output rows the family's own likelihood code normalises over (``Family.likelihood_vocab``: ``tokenizer``
    #: or ``all``); read only when a caller asks for the family's rule (``vocab_rows="all"`` below)
    likelihood_vocab: str = "tokenizer"
    #: the LoRA adapter loaded onto the module (:class:`dlmeval.models.adapters.AdapterInfo`), and what it adds to
    #: the identity
    adapter: Any = None
    identity_extra: dict[str, Any] = {}  # replaced per instance, never mutated in place

    def __init__(
        self,
        module: nn.Module,
        tokenizer: Any,
        *,
        name: str,
        source: str,
        mask_token_id: int,
        max_length: int,
        device: torch.device,
        dtype: torch.dtype,
        padding_side: str | None = None,
        pad_token_id: int | None = None,
        eos_token_ids: Sequence[int] = (),
        bos_token_id: int | None = None,
        chat_template: bool = False,
    ):
        self.module = module
        self.tokenizer = tokenizer
        self.name = name
        self.source = source
        self.mask_token_id = int(mask_token_id)
        self.max_length = int(max_length)
        self.device = device
        self.dtype = dtype
        fam = family_of(self)
        if fam is not None:  # the family's registered facts (dlmeval.models.family) are the adapter's
            self.logit_shift = fam.logit_shift
            self.native_schedule = fam.native_schedule
            self.prepend_bos = fam.bos == "prepend"
            self.likelihood_vocab = fam.likelihood_vocab
        self.padding_side = padding_side or (fam.padding_side if fam is not None else "right")
        if pad_token_id is None:
            pad_token_id = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = int(pad_token_id if pad_token_id is not None else self.mask_token_id)
        self.eos_token_ids = tuple(int(t) for t in eos_token_ids)
        self.bos_token_id = bos_token_id
        self.has_chat_template = chat_template
        self.nfe = 0
        self.rows_forwarded = 0
        self._sha: str | None = None
        #: what the loader had to guess (fallback constants, disagreeing files); ``dlmeval check-model`` shows them
        self.load_warnings: list[str] = []
        self._pad_vocab: torch.Tensor | None | bool = False  # False: not computed yet

    # ------------------------------------------------------------------ vocabulary padding
    def _padded_vocab(self, width: int) -> torch.Tensor | None:
        """Bool ``[V]`` of the output ids past the tokenizer (released checkpoints pad their vocabulary: LLaDA
        126,464 rows for a 126,349-token tokenizer), or None when there are none. Their logits are set to the
        float32 minimum, so nothing samples, ranks or normalises over an id the tokenizer cannot decode."""
        import torch

        if self._pad_vocab is False or (
            isinstance(self._pad_vocab, torch.Tensor) and self._pad_vocab.shape[0] != width
        ):
            try:
                n = len(self.tokenizer)
            except TypeError:
                n = width
            with torch.inference_mode(False):  # a normal tensor, so training after inference can use it
                self._pad_vocab = (torch.arange(width, device=self.device) >= n) if n < width else None
        return self._pad_vocab if isinstance(self._pad_vocab, torch.Tensor) else None

    def _vocab_masked(self, z: torch.Tensor, rows: str = "tokenizer") -> torch.Tensor:
        """``z`` with the padded vocabulary rows at the float32 minimum; ``rows="all"``: as it is (every row of the
        head takes part in the normalisation, as the families' own likelihood code has it)."""
        import torch

        if rows == "all":
            return z
        if rows != "tokenizer":
            raise InputError(f"vocab_rows must be 'tokenizer' or 'all', got {rows!r}")
        pad = self._padded_vocab(z.shape[-1])
        if pad is None:
            return z
        return z.masked_fill(pad.to(z.device), torch.finfo(z.dtype).min)

    # ------------------------------------------------------------------ adapter hooks
    def _run(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        output_hidden_states: bool,
    ) -> RunOut:
        raise NotImplementedError

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _run_4d(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        mask4: torch.Tensor,
        position_ids: torch.Tensor,
        output_hidden_states: bool,
    ) -> RunOut:
        """The trunk under an explicit boolean attention mask ``[B, 1, L, L]`` (True: may attend) and position ids
        ``[B, L]``: the families with ``block_attention = True`` implement it."""
        raise InputError(f"{self.family} models take no explicit attention mask")

    # ------------------------------------------------------------------ bookkeeping
    @property
    def vocab_size(self) -> int:
        return int(self.input_embeddings().weight.shape[0])

    def input_embeddings(self) -> nn.Embedding:
        from torch import nn

        emb = self.module.get_input_embeddings()
        assert isinstance(emb, nn.Embedding)
        return emb

    def identity(self) -> ModelIdentity:
        # identity_extra: e.g. the LoRA adapter (dlmeval.models.adapters)
        return model_identity(self, self.dtype, self.mask_token_id, self.identity_extra)

    def invalidate_identity(self) -> None:
        """Call after changing weights (training) so the hash is recomputed."""
        self._sha = None

    # ------------------------------------------------------------------ forward passes
    def _checked(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None) -> int:
        x = input_ids if input_ids is not None else inputs_embeds
        if x is None:
            raise InputError("either input_ids or inputs_embeds is needed")
        if x.shape[1] > self.max_length:
            raise InputError(f"{x.shape[1]} tokens exceed the model's window of {self.max_length}")
        return int(x.shape[0])

    def _source_positions(
        self, batch_index: torch.Tensor, position: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Where the output that scores (batch_index, position) is read: ``position - logit_shift``, except that a
        row's first real token reads its own output (as Dream does for position 0), so left padding changes
        nothing."""
        import torch

        if self.logit_shift == 0:
            return position
        first = torch.zeros_like(position)
        if attention_mask is not None and attention_mask.dim() == 2:
            first = self.offset(attention_mask)[batch_index]  # from the mask: either padding side
        return torch.where(position <= first, position, position - self.logit_shift)

    def _aligned(self, t: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Re-align a per-position tensor [B, L, ...] so that position i holds what predicts token i."""
        import torch

        if self.logit_shift == 0:
            return t
        b, n = t.shape[:2]
        bi = torch.arange(b, device=t.device).repeat_interleave(n)
        pi = torch.arange(n, device=t.device).repeat(b)
        src = self._source_positions(bi, pi, attention_mask)
        return t[bi, src].view(t.shape)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        *,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> ForwardOut:
        """Full float32 logits ``[B, L, V]``, aligned. Keeps autograd (use :meth:`logits` for inference)."""
        b = self._checked(input_ids, inputs_embeds)
        out = self._run(input_ids, attention_mask, inputs_embeds, output_hidden_states)
        self._count(b)
        logits = out.logits if out.logits is not None else self._head(out.last_hidden)
        return ForwardOut(
            self._vocab_masked(self._aligned(logits.float(), attention_mask)), out.hidden_states
        )

    @no_grad
    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.forward(input_ids, attention_mask).logits

    @no_grad
    def logits_at(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        positions: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
        *,
        inputs_embeds: torch.Tensor | None = None,
        block_size: int | None = None,
        vocab_rows: str = "tokenizer",
    ) -> torch.Tensor:
        """Float32 logits ``[N, V]`` only at ``positions``, aligned like :meth:`logits`: a bool mask ``[B, L]``
        (rows in ``positions.nonzero()`` order) or a pair ``(batch_index, position)`` of long tensors (rows in
        that order). One forward pass; the vocabulary projection runs on the ``N`` gathered hidden states only, so
        neither the full ``[B, L, V]`` projection nor a gather out of it is paid for positions nobody reads (the
        sampler's path).

        ``inputs_embeds`` (``[B, L, H]``) replaces the token embeddings of ``input_ids`` (soft-mask feedback,
        :mod:`dlmeval.sampling.softmask`; ``input_ids`` still gives the shape and the positions). ``block_size``
        runs the network block-causally (:func:`block_causal_mask`: blocks of ``block_size`` physical columns, each
        seeing itself and the blocks before it; block diffusion, :mod:`dlmeval.sampling.block`); only families
        with ``block_attention = True`` take it. ``vocab_rows="all"`` keeps the padded vocabulary rows' logits
        (:meth:`_vocab_masked`)."""
        b = self._checked(input_ids, inputs_embeds)
        bi, pi = position_pairs(positions, tuple(input_ids.shape))
        ids = input_ids if inputs_embeds is None else None
        if block_size is not None:
            if not self.block_attention:
                raise InputError(
                    f"{self.family} models attend bidirectionally only; block-causal attention (block_size) "
                    "needs a block-diffusion family (a2d-bd3lm:PATH)"
                )
            mask4, pos = block_causal_mask(
                attention_mask, input_ids.shape, block_size, device=input_ids.device
            )
            out = self._run_4d(ids, inputs_embeds, mask4, pos, False)
        else:
            out = self._run(ids, attention_mask, inputs_embeds, False)
        self._count(b)
        src = self._source_positions(bi, pi, attention_mask)
        if out.logits is not None:
            return self._vocab_masked(out.logits[bi, src].float(), vocab_rows)
        return self._vocab_masked(self._head(out.last_hidden[bi, src]).float(), vocab_rows)

    @no_grad
    def hidden_states(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Hidden states of every layer (embeddings first), float32 ``[B, L, H]`` each."""
        b = self._checked(input_ids, None)
        out = self._run(input_ids, attention_mask, None, True)
        self._count(b)
        assert out.hidden_states is not None
        return tuple(h.float() for h in out.hidden_states)

    def score_positions(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        positions: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        inputs_embeds: torch.Tensor | None = None,
        entropy: bool = False,
        top_k: int = 0,
        max_logprob: bool = False,
        chunk: int = 4096,
        grad: bool = False,
        vocab_rows: str = "tokenizer",
    ) -> PositionScores:
        """Log-probabilities only at ``positions`` (bool ``[B, L]``), the memory-lean path.

        ``targets`` (``[B, L]`` long; read only where ``positions``) are the tokens to score; when omitted,
        ``logprob`` holds the log of the largest probability. ``max_logprob=True`` also returns the log of the
        largest probability beside the targets' (calibration reads it); off by default, since a max over the whole
        vocabulary per position is a measurable share of a scoring pass that DiffScore does not use. The ``[B, L, V]`` float32 tensor is never built:
        hidden states are gathered at the positions (shifted for Dream-style models) and projected in chunks of
        ``chunk`` rows. ``grad=True`` lets gradients flow (to ``inputs_embeds`` or the weights); by default the
        call runs under ``torch.no_grad`` so that scoring never keeps an autograd graph. ``vocab_rows="all"``
        normalises over every row of the head, the padded vocabulary included (:meth:`_vocab_masked`).
        """
        import torch

        if not grad and torch.is_grad_enabled():
            with torch.no_grad():
                return self.score_positions(
                    input_ids,
                    attention_mask,
                    positions,
                    targets,
                    inputs_embeds=inputs_embeds,
                    entropy=entropy,
                    top_k=top_k,
                    max_logprob=max_logprob,
                    chunk=chunk,
                    grad=False,
                    vocab_rows=vocab_rows,
                )
        b = self._checked(input_ids, inputs_embeds)
        if positions.dtype != torch.bool:
            raise InputError("positions must be a boolean mask [B, L]")
        out = self._run(input_ids, attention_mask, inputs_embeds, False)
        self._count(b)
        bi, pi = positions.nonzero(as_tuple=True)
        src = self._source_positions(bi, pi, attention_mask)
        tgt = targets[bi, pi] if targets is not None else None
        lp, ent, tids, tlps, mx = [], [], [], [], []
        for s in range(0, bi.numel(), chunk):
            sl = slice(s, s + chunk)
            if out.logits is not None:
                z = out.logits[bi[sl], src[sl]].float()
            else:
                z = self._head(out.last_hidden[bi[sl], src[sl]]).float()
            logp = torch.log_softmax(self._vocab_masked(z, vocab_rows), dim=-1)
            m = logp.max(dim=-1).values if (max_logprob or tgt is None) else None
            if max_logprob:
                mx.append(m)
            lp.append(logp.gather(1, tgt[sl].unsqueeze(1)).squeeze(1) if tgt is not None else m)
            if entropy:
                ent.append(-(logp.exp() * logp).sum(-1))
            if top_k:
                v, i = logp.topk(top_k, dim=-1)
                tids.append(i)
                tlps.append(v)
        empty = torch.zeros(0, device=positions.device)
        cat = lambda xs: torch.cat(xs) if xs else empty  # noqa: E731
        return PositionScores(
            batch_index=bi,
            position=pi,
            logprob=cat(lp),
            entropy=cat(ent) if entropy else None,
            top_ids=torch.cat(tids)
            if top_k and tids
            else (torch.zeros(0, top_k, dtype=torch.long) if top_k else None),
            top_logprobs=torch.cat(tlps) if top_k and tlps else (torch.zeros(0, top_k) if top_k else None),
            max_logprob=cat(mx) if max_logprob else None,
        )

    # ------------------------------------------------------------------ conveniences
    def to_inputs(self, seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.pad(seqs)

    def train_mode(self, on: bool = True) -> None:
        self.module.train(on)

    def parameters(self):
        return self.module.parameters()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, family={self.family!r}, device={self.device.type})"
