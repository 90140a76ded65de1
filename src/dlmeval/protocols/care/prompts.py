"""The texts of a Care sweep: prompt prefixes of exactly ``prefix_tokens`` tokens under a model's tokenizer, the
human reference texts MAUVE compares with (both cut from a corpus's texts, which a run reads once through its
plan: :mod:`dlmeval.protocols.care.plan`), and the generated text as it follows its prefix."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dlmeval.errors import InputError


@dataclass(frozen=True)
class PromptItem:
    item_id: str
    ids: list[int]  # special prefix tokens (e.g. [CLS]) + exactly prefix_tokens content tokens
    text: str  # the prefix decoded without special tokens


def corpus_rows(corpus, name: str, allow_download: bool = False) -> tuple[tuple[str, ...], dict]:
    """A sourced corpus's texts (its ``field``, empty ones dropped) and the rows' provenance; read once per
    process while its files are unchanged (after a download, later reads come from the ``datasets`` cache)."""
    from dlmeval.data.hub import source_stamp

    return _corpus_rows(corpus, name, allow_download, source_stamp(corpus.source))


@functools.lru_cache(maxsize=8)
def _corpus_rows(corpus, name: str, allow_download: bool, stamp: tuple) -> tuple[tuple[str, ...], dict]:
    from dlmeval.data.rows import read_source

    rows = read_source(
        name, corpus.data_source(), allow_download=allow_download, columns=[corpus.field], limit=corpus.limit,
        sample=corpus.sample, sample_seed=corpus.sample_seed, what=f"corpora.{name}",
    )  # fmt: skip
    texts = []
    for i, r in enumerate(rows):
        t = r[corpus.field]
        if not isinstance(t, str):
            raise InputError(f"corpora.{name}: row {i}: field {corpus.field!r} is not a string")
        if t.strip():
            texts.append(t)
    return tuple(texts), rows.provenance


def source_texts(source: str, data_dir, corpus=None) -> list[str]:
    """The texts of a corpus: its source's rows (``corpus.source``), or the shipped stand-in of a built-in name."""
    if corpus is not None and corpus.source is not None:
        return list(corpus_rows(corpus, source)[0])
    from dlmeval.data.tasks import load_lm1b_reference, load_webtext_reference

    loader = {"webtext": load_webtext_reference, "lm1b": load_lm1b_reference}.get(source)
    if loader is None:
        raise InputError(f"corpus {source!r} has no shipped stand-in: give [corpora.{source}] source = ...")
    return [r.text for r in loader(data_dir)]


def special_prefix(model) -> list[int]:
    """The ids a family puts before a text ([CLS], <bos>, ...), without trailing EOS ids."""
    ids = model.encode("", add_special_tokens=True)
    eos = set(model.eos_token_ids)
    while ids and ids[-1] in eos:
        ids.pop()
    return ids


def build_prompts(
    model, source: str, n: int, prefix_tokens: int, data_dir=None, corpus=None, *, at_least: int | None = None
) -> list[PromptItem]:
    """``n`` prefixes of exactly ``prefix_tokens`` content tokens from the first half of ``source``'s texts
    (:func:`prompts_from_texts` on :func:`source_texts`). ``corpus``: the :class:`CorpusSpec` (default: the
    built-in of that name). A run cuts its prompts from the texts its plan read once
    (:meth:`dlmeval.protocols.care.plan.CarePlan.prompts`)."""
    from dlmeval.protocols.care.spec import CORPORA

    corpus = corpus or CORPORA.get(source)
    documents = corpus is None or corpus.style == "documents"
    texts = source_texts(source, data_dir, corpus)
    return prompts_from_texts(model, source, texts, n, prefix_tokens, documents=documents, at_least=at_least)


def prompts_from_texts(
    model,
    source: str,
    texts: Sequence[str],
    n: int,
    prefix_tokens: int,
    *,
    documents: bool = True,
    at_least: int | None = None,
) -> list[PromptItem]:
    """``n`` prefixes of exactly ``prefix_tokens`` content tokens from the first half of ``texts`` (``source``'s).

    ``documents`` style (webtext: documents of <= 61 words; OpenWebText): the first documents that alone have
    ``prefix_tokens`` tokens, cut there. ``sentences`` style (``documents=False``; lm1b: single sentences):
    consecutive sentences joined by a space until there are enough tokens, cut there. Item ids name the first text
    used (``webtext/12``), so they are stable across models. ``at_least``: accept fewer than ``n`` (a pool to draw
    from) as long as there are this many.
    """
    pool = texts[: len(texts) // 2]
    special = special_prefix(model)
    out: list[PromptItem] = []
    i = 0
    while i < len(pool) and len(out) < n:
        start = i
        if documents:
            ids = model.encode(pool[i], add_special_tokens=False)
            i += 1
            if len(ids) < prefix_tokens:
                continue
        else:
            ids = []
            while i < len(pool) and len(ids) < prefix_tokens:
                ids += model.encode(pool[i], add_special_tokens=False)
                i += 1
            if len(ids) < prefix_tokens:
                break
        full = special + ids[:prefix_tokens]
        out.append(PromptItem(f"{source}/{start}", full, model.decode(full)))
    if len(out) < (n if at_least is None else at_least):
        raise InputError(
            f"only {len(out)} {source} prefixes of {prefix_tokens} tokens are available for {getattr(model, 'name', '')}, "
            f"{n} were asked for; lower generation.n_prompts or generation.prefix_tokens"
        )
    return out


#: with ``resample_prompts``, each seed draws its n prompts from the first POOL_FACTOR x n prefixes
POOL_FACTOR = 4


def build_references(source: str, n: int, words: int, data_dir=None, corpus=None) -> list[str]:
    """``n`` human reference texts of ``words`` whitespace words from the second half of ``source``
    (:func:`references_from_texts` on :func:`source_texts`)."""
    return references_from_texts(source, source_texts(source, data_dir, corpus), n, words)


def references_from_texts(source: str, texts: Sequence[str], n: int, words: int) -> list[str]:
    """``n`` human reference texts of ``words`` whitespace words from the second half of ``texts`` (``source``'s;
    disjoint from the prompts): consecutive texts joined by a space and cut at ``words`` words; model-independent."""
    pool = texts[len(texts) // 2 :]
    out: list[str] = []
    buf: list[str] = []
    for t in pool:
        buf += t.split()
        if len(buf) >= words:
            out.append(" ".join(buf[:words]))
            buf = []
            if len(out) == n:
                return out
    raise InputError(
        f"the {source} reference pool gives only {len(out)} texts of {words} words; lower metrics.n_reference "
        "or metrics.reference_words"
    )


def continuation_text(model, prefix_ids: Sequence[int], gen_ids: Sequence[int], fallback: str) -> str:
    """The generated text exactly as it follows the decoded prefix (keeps a leading space; WordPiece pieces that
    glue onto the prefix keep no space)."""
    head = model.decode(list(prefix_ids))
    full = model.decode(list(prefix_ids) + list(gen_ids))
    if full.startswith(head):
        return full[len(head) :]
    return (" " + fallback) if fallback else ""


def model_label(model_spec: str) -> str:
    """The name a model has in the tables: the spec, with a path shortened to its last part
    (``llada:/models/LLaDA-8B-Base`` -> ``llada:LLaDA-8B-Base``)."""
    kind, sep, rest = model_spec.partition(":")
    if not sep or not rest:
        return model_spec
    return f"{kind}:{Path(rest.rstrip('/')).name or rest}"


__all__ = [
    "PromptItem",
    "build_prompts",
    "build_references",
    "corpus_rows",
    "prompts_from_texts",
    "references_from_texts",
    "continuation_text",
    "model_label",
    "source_texts",
    "special_prefix",
]
