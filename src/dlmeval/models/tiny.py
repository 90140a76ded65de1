"""Tiny random stand-ins built from configs in code, so that tests of real behaviour run in seconds.

* ``tiny-bert``: a 2-layer BERT masked LM (``hf-mlm`` adapter)
* ``tiny-llada``: a LLaDA-like bidirectional Llama with a mask token and a remote-code-style forward (``llada``)
* ``tiny-dream``: a Dream-like bidirectional Llama whose raw output at i-1 predicts token i (``dream`` adapter)
* ``tiny-causal``: a 2-layer Llama causal LM (``CausalLM``)

All share a word-level tokenizer over :data:`TINY_WORDS` (lower-case words split on whitespace and punctuation;
unknown words map to ``[UNK]``). Weights are a pure function of the seed.
"""

from __future__ import annotations

import torch
from torch import nn

from dlmeval.models.base import resolve_device

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<eos>", "<bos>"]
TINY_WORDS = (
    "the a an of to in on at for with by from and or but not is was are were be been has have had it this that "
    "he she they we you i his her their our cat dog man woman child city river house car book food water day night "
    "year time world people king queen paris london france england capital wrote authored written founded built "
    "big small good bad old new red blue green happy sad fast slow runs ran sat eats ate sees saw goes went "
    "one two three four five six seven eight nine ten yes no answer question . , ? ! ' -"
).split()


def tiny_tokenizer(style: str = "bert"):
    """A fast word-level tokenizer. ``style="bert"`` wraps texts as ``[CLS] ... [SEP]``; ``"llama"`` prepends ``<bos>``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIALS + [w for w in TINY_WORDS if w not in SPECIALS])}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
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


class TinyBidirectionalLM(nn.Module):
    """A Llama trunk with full (bidirectional) attention and an LM head.

    ``api="llada"`` mimics LLaDA's remote-code forward (``input_embeddings=`` keyword, 2D mask);
    ``api="dream"`` mimics Dream's (``inputs_embeds=``, 4D mask and ``position_ids`` passed by the caller).
    """

    def __init__(self, config, api: str = "llada"):
        super().__init__()
        from transformers import LlamaModel

        self.config = config
        self.api = api
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        input_embeddings=None,
        inputs_embeds=None,
        position_ids=None,
        output_hidden_states=False,
        **_,
    ):
        emb = input_embeddings if input_embeddings is not None else inputs_embeds
        x = input_ids if input_ids is not None else emb
        b, n = x.shape[0], x.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones(b, n, dtype=torch.long, device=x.device)
        if attention_mask.dim() == 2:
            am = attention_mask.bool()
            mask4 = (am[:, None, :, None] & am[:, None, None, :]) | torch.eye(
                n, dtype=torch.bool, device=x.device
            )
            if position_ids is None:
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        else:
            mask4 = attention_mask
        out = self.model(
            input_ids=input_ids if emb is None else None,
            inputs_embeds=emb,
            attention_mask=mask4,
            position_ids=position_ids,
            output_hidden_states=output_hidden_states,
        )
        logits = self.lm_head(out.last_hidden_state)
        return _Out(logits, out.hidden_states if output_hidden_states else None)


class _Out:
    def __init__(self, logits, hidden_states):
        self.logits = logits
        self.hidden_states = hidden_states


def tiny_model(kind: str, *, seed: int = 0, device: str | None = "cpu", layers: int = 2, hidden: int = 32):
    """Build a tiny stand-in: ``bert``, ``llada``, ``dream`` (DiffusionLM) or ``causal`` (CausalLM)."""
    dev = resolve_device(device)
    torch.manual_seed(seed)
    v = tiny_vocab_size()
    name = f"tiny-{kind}"
    if kind == "bert":
        from transformers import BertConfig, BertForMaskedLM

        from dlmeval.models.hf_mlm import HFMaskedLM

        cfg = BertConfig(
            vocab_size=v,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            intermediate_size=2 * hidden,
            max_position_embeddings=128,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            pad_token_id=0,
        )
        m = BertForMaskedLM(cfg).to(dev).eval()
        return HFMaskedLM(
            m,
            tiny_tokenizer("bert"),
            name=name,
            source=f"tiny:bert:seed={seed}",
            max_length=128,
            device=dev,
            dtype=torch.float32,
        )
    if kind in ("llada", "dream"):
        m = TinyBidirectionalLM(_llama_config(v, layers, hidden), api=kind).to(dev).eval()
        tok = tiny_tokenizer("llama")
        kw = dict(
            name=name,
            source=f"tiny:{kind}:seed={seed}",
            mask_token_id=tok.mask_token_id,
            max_length=128,
            device=dev,
            dtype=torch.float32,
            eos_token_ids=[tok.eos_token_id],
            bos_token_id=tok.bos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        if kind == "llada":
            from dlmeval.models.llada import LLaDALM

            return LLaDALM(m, tok, **kw)
        from dlmeval.models.dream import DreamLM

        return DreamLM(m, tok, **kw)
    if kind == "causal":
        from transformers import LlamaForCausalLM

        from dlmeval.models.causal import HFCausalLM

        m = LlamaForCausalLM(_llama_config(v, layers, hidden)).to(dev).eval()
        tok = tiny_tokenizer("llama")
        return HFCausalLM(
            m,
            tok,
            name=name,
            source=f"tiny:causal:seed={seed}",
            device=dev,
            dtype=torch.float32,
            max_length=128,
        )
    raise ValueError(f"unknown tiny model kind {kind!r}; choose bert, llada, dream or causal")
