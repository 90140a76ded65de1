"""Tiny random stand-ins built from configs in code, so that tests of real behaviour run in seconds.

* ``tiny-bert``: a 2-layer BERT masked LM (``hf-mlm`` adapter)
* ``tiny-llada``, ``tiny-dream``: the family stand-ins of :mod:`dlmeval.models.standins`: checkpoint directories
  with ``auto_map`` and dlmeval's own model code, loaded through ``AutoModel`` + ``trust_remote_code`` by the
  family loaders exactly as a real LLaDA / Dream checkpoint is
* ``tiny-causal``: a 2-layer Llama causal LM (``CausalLM``)

``tiny-bert`` and ``tiny-causal`` share a word-level tokenizer over :data:`TINY_WORDS` (lower-case words split on
whitespace and punctuation; unknown words map to ``[UNK]``). Weights are a pure function of the seed; for seed 0
(the CLI's ``tiny-bert`` / ``tiny-causal``) the initialised weights ship (:mod:`dlmeval.models.standin_weights`),
because ``torch.nn.init`` draws other bits under another CPU instruction set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<eos>", "<bos>"]
TINY_WORDS = (
    "the a an of to in on at for with by from and or but not is was are were be been has have had it this that "
    "he she they we you i his her their our cat dog man woman child city river house car book food water day night "
    "year time world people king queen paris london france england capital wrote authored written founded built "
    "big small good bad old new red blue green happy sad fast slow runs ran sat eats ate sees saw goes went "
    "one two three four five six seven eight nine ten yes no answer question . , ? ! ' -"
).split()


def word_level(vocab: dict[str, int], unk: str = "[UNK]", normalizer=None):
    """A ``tokenizers.Tokenizer`` over ``vocab`` that splits a text into words on white space and punctuation,
    lower-cased (or as ``normalizer`` normalises it); an unknown word is ``unk``: every tiny stand-in's tokenizer."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    tk.normalizer = normalizers.Lowercase() if normalizer is None else normalizer
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    return tk


def tiny_vocab() -> dict[str, int]:
    """The vocabulary of :func:`tiny_tokenizer`: :data:`SPECIALS`, then :data:`TINY_WORDS`."""
    return {t: i for i, t in enumerate(SPECIALS + [w for w in TINY_WORDS if w not in SPECIALS])}


def tiny_tokenizer(style: str = "bert"):
    """A fast word-level tokenizer. ``style="bert"`` wraps texts as ``[CLS] ... [SEP]``; ``"llama"`` prepends ``<bos>``."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    vocab = tiny_vocab()
    tk = word_level(vocab)
    if style == "bert":
        tk.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
        kw = dict(cls_token="[CLS]", sep_token="[SEP]")
    else:
        tk.post_processor = processors.TemplateProcessing(
            single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
        )
        kw = dict(bos_token="<bos>", eos_token="<eos>")
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        pad_token="[PAD]",
        unk_token="[UNK]",
        mask_token="[MASK]",
        model_max_length=128,
        **kw,
    )
    from tokenizers import decoders

    tk.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return tok


def tiny_vocab_size() -> int:
    return len(SPECIALS) + len([w for w in TINY_WORDS if w not in SPECIALS])


def _llama_config(seed_vocab: int, layers: int = 2, hidden: int = 32):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=seed_vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )


#: the stand-in builders by kind, each registered by its family's module (:func:`register_standin`)
_STANDINS: dict[str, Callable[..., Any]] = {}


def register_standin(kind: str, build: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``build(*, seed, device, layers, hidden)``, the builder of stand-in ``kind`` (``tiny_model(kind)``);
    a family's module calls it for its stand-in, so this module never imports a family."""
    _STANDINS[kind] = build
    return build


def standin_kinds() -> tuple[str, ...]:
    """The registered stand-in kinds (every family module imported first)."""
    from dlmeval.models.family import load_families

    load_families()
    return tuple(_STANDINS)


def tiny_model(kind: str, *, seed: int = 0, device: str | None = "cpu", layers: int = 2, hidden: int = 32):
    """Build a tiny stand-in of a registered ``kind``: ``bert``, ``llada``, ``dream`` (DiffusionLM), ``causal``
    (CausalLM), the checkpoint stand-ins of :mod:`dlmeval.models.standin_families` (``a2d``, ...)."""
    if kind not in _STANDINS:
        standin_kinds()  # the family modules register their builders on import
    if kind not in _STANDINS:
        raise ValueError(f"unknown tiny model kind {kind!r}; choose {', '.join(_STANDINS)}")
    return _STANDINS[kind](seed=seed, device=device, layers=layers, hidden=hidden)


def standin_loader(kind: str) -> Callable[[Any], Any]:
    """``Family.load_standin`` of stand-in ``kind``: :func:`tiny_model` seeded by the load options, on their device
    (by default the CPU)."""

    def load(opts) -> Any:
        return tiny_model(kind, seed=opts.seed, device=opts.device or "cpu")

    return load


def tiny_t5(
    directory,
    words,
    *,
    seed: int = 0,
    max_length: int = 1024,
    join_decoder: bool = False,
    tie_word_embeddings: bool = True,
    never_generate=(),
):
    """A tiny random T5 checkpoint (a ``save_pretrained`` directory, loaded exactly as a real one) over a word-level
    tokenizer of ``words`` + :data:`TINY_WORDS` whose first three entries must be ``<pad>``, ``</s>``, ``<unk>``.
    ``</s>`` inside a text is a separator carrying no token; ``join_decoder`` decodes with spaces between tokens;
    ``never_generate`` words get zero output weights. Weights are a pure function of ``seed`` (the UniEval and
    QuestEval baselines' tests)."""
    from pathlib import Path

    import torch
    from tokenizers import decoders, normalizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    if list(words[:3]) != ["<pad>", "</s>", "<unk>"]:
        raise ValueError("tiny_t5 needs <pad>, </s>, <unk> as its first three words")
    vocab = {w: i for i, w in enumerate(dict.fromkeys(list(words) + list(TINY_WORDS)))}
    tk = word_level(vocab, "<unk>", normalizers.Replace("</s>", " "))
    tk.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", vocab["</s>"])]
    )
    if join_decoder:
        tk.decoder = decoders.WordPiece(prefix="##")  # joins tokens with spaces
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=max_length,
        model_input_names=["input_ids", "attention_mask"],
    )
    d = Path(directory)
    tok.save_pretrained(str(d))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cfg = T5Config(
            vocab_size=len(vocab),
            d_model=16,
            d_kv=8,
            d_ff=32,
            num_layers=1,
            num_heads=2,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
            tie_word_embeddings=tie_word_embeddings,
        )
        model = T5ForConditionalGeneration(cfg)
        if never_generate:
            with torch.no_grad():
                model.lm_head.weight[[vocab[w] for w in never_generate]] = 0.0
        model.save_pretrained(str(d))
    return d
