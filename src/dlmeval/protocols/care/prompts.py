"""The texts of a Care sweep: prompt prefixes of exactly ``prefix_tokens`` tokens under a model's tokenizer, the
human reference texts MAUVE compares with, the digest of every data file read, and the generated text as it
follows its prefix."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlmeval.errors import InputError
from dlmeval.protocols.care.spec import CareSpec


@dataclass(frozen=True)
class PromptItem:
    item_id: str
    ids: list[int]  # special prefix tokens (e.g. [CLS]) + exactly prefix_tokens content tokens
    text: str  # the prefix decoded without special tokens


def data_identity(spec: CareSpec, data_dir=None, *, allow_download: bool = False) -> dict[str, Any]:
    """A digest of every data file the sweep reads (prompt / reference sources, downstream tasks), for the run
    configurations: item keys are positional (``webtext/17``), so changed data must make another run. A corpus
    or task read from a hub id or a local dataset enters as its rows' provenance (kind, id / path, config,
    split, fields, row count, content digest: :mod:`dlmeval.data.hub`) under ``corpus:<name>`` /
    ``task:<name>``; this is also where such data is first read (downloaded with ``allow_download``)."""
    from dlmeval.data import tasks as T
    from dlmeval.data.paths import data_dir as resolve
    from dlmeval.data.paths import file_digest
    from dlmeval.protocols.care.data import downstream_identity

    files = {"webtext": T.WEBTEXT_FILE, "lm1b": T.LM1B_FILE}
    used, sourced = [], {}
    for s in dict.fromkeys(spec.generation.sources):
        c = spec.corpus(s)
        if c.source is not None:
            sourced[f"corpus:{s}"] = corpus_rows(c, s, allow_download=allow_download)[1]
        elif s in files:
            used.append(files[s])
    d = spec.downstream
    if d.enabled:
        tasks = (
            (T.ARC_CHALLENGE_FILE, d.arc),
            (T.HUMANEVAL_FILE, d.humaneval),
            (T.GSM8K_FILE, d.gsm8k),
        )
        used += [f for f, t in tasks if t.n and t.source is None]
        sourced.update(downstream_identity(spec, data_dir, allow_download=allow_download))
    root = resolve(data_dir)
    out: dict[str, Any] = {str(f): file_digest(root / f) for f in used if (root / f).is_file()}
    return {**out, **sourced}


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
    """``n`` prefixes of exactly ``prefix_tokens`` content tokens from the first half of ``source``'s texts.

    ``documents`` style (webtext: documents of <= 61 words; OpenWebText): the first documents that alone have
    ``prefix_tokens`` tokens, cut there. ``sentences`` style (lm1b: single sentences): consecutive sentences joined
    by a space until there are enough tokens, cut there. ``corpus``: the :class:`CorpusSpec` (default: the built-in
    of that name). Item ids name the first text used (``webtext/12``), so they are stable across models.
    ``at_least``: accept fewer than ``n`` (a pool to draw from) as long as there are this many.
    """
    from dlmeval.protocols.care.spec import CORPORA

    corpus = corpus or CORPORA.get(source)
    documents = corpus is None or corpus.style == "documents"
    texts = source_texts(source, data_dir, corpus)
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


def cell_prompts(spec: CareSpec, model, data_dir=None) -> dict:
    """The prompts of every source: ``{source: [...]}`` (the same for every seed, the paper's reading: "seed
    variance reflects sampling stochasticity only"), or with ``generation.resample_prompts`` ``{(source, seed):
    [...]}``: each sweep seed draws ``n_prompts`` of the first ``POOL_FACTOR x n_prompts`` prefixes (fewer when
    the corpus has fewer, at least ``n_prompts``) without replacement, from a generator seeded by (run seed,
    source, seed), in pool order."""
    from dlmeval.seeding import numpy_rng

    g = spec.generation
    out: dict = {}
    for src in g.sources:
        corpus = spec.corpus(src)
        if not g.resample_prompts:
            out[src] = build_prompts(model, src, g.n_prompts, g.prefix_tokens, data_dir, corpus)
            continue
        pool = build_prompts(
            model, src, POOL_FACTOR * g.n_prompts, g.prefix_tokens, data_dir, corpus, at_least=g.n_prompts
        )
        seeds = {*spec.sweep.seeds, *spec.compute_matched.seeds, *spec.dose_response.seeds}
        for seed in sorted(seeds):
            pick = numpy_rng(spec.seed, "prompts", src, seed).choice(len(pool), g.n_prompts, replace=False)
            out[(src, seed)] = [pool[i] for i in sorted(pick.tolist())]
    return out


def build_references(source: str, n: int, words: int, data_dir=None, corpus=None) -> list[str]:
    """``n`` human reference texts of ``words`` whitespace words from the second half of ``source`` (disjoint from
    the prompts): consecutive texts joined by a space and cut at ``words`` words; model-independent."""
    texts = source_texts(source, data_dir, corpus)
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
    "cell_prompts",
    "corpus_rows",
    "continuation_text",
    "data_identity",
    "model_label",
    "source_texts",
    "special_prefix",
]
