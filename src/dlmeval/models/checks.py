"""A one-minute self-test of a loaded diffusion LM (``dlmeval check-model``).

Each check returns a :class:`Check` row (name, passed, the number it measured, the threshold, a detail line):

=================  ==================================================================================================
``mask id``        the mask id is a special token of the tokenizer, not EOS / pad, and agrees with the tokenizer's
                   mask role where it has one; the loader found no disagreement between the files
``eos ids``        every EOS / EoT id is a special token of the tokenizer; the chat template's end-of-turn is in it
``pad id``         the pad id lies inside the tokenizer and is not the mask id
``attention``      the family's attention kind, probed: changing the last token moves the first positions' logits
                   (bidirectional), does not (causal), or moves only its own block (block-causal: blocks of the
                   model's ``block_size`` over a probe of at least two blocks)
``alignment``      masked-token recovery: mean log-prob of the true token at masked positions read at the
                   adapter's alignment vs one position left / right of it; on the probe set with the clearest
                   difference the adapter's must win by a margin (a wrong logit shift fails here)
``vocab padding``  ids past the tokenizer get no probability mass (their logits are the float32 minimum)
``batch``          a row's logits alone and inside a padded batch agree (every logit comparison: within 16 units in
                   the last place of the model's dtype at the logits' magnitude, at least 1e-4)
``padding``        left padding, right padding and extra padding give the same logits for the real tokens
``gradient``       ``forward(inputs_embeds=)`` equals ``forward(input_ids)``, and a loss reaches the embeddings
                   with finite, non-zero gradients (D-GCG's and ``score_positions(grad=True)``'s path)
``sampler``        (:mod:`dlmeval.sampling.checks`, above this layer) where the checkpoint ships its own sampler (Dream's ``diffusion_generate``): dlmeval's sampler
                   and it produce the same tokens at temperature 0, for each native algorithm at 1, 3 and 8
                   steps (an inherited top_k changes the order from 2 steps on; it is reported)
=================  ==================================================================================================

Nothing here knows a family by name: it reads the :class:`~dlmeval.models.base.DiffusionLM` interface, the
model's registered :class:`~dlmeval.models.family.Family` (which rows apply, the attention kind, the native
samplers) and, for the sampler row, whether the module has a ``diffusion_generate`` method.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

#: natural sentences (real checkpoints) and a successor run of the stand-ins' training words
PROBES_TEXT = [
    "The capital of France is Paris, and the capital of England is London.",
    "She opened the door, looked outside, and saw that it was raining again.",
    "One, two, three, four, five, six, seven, eight, nine, ten.",
]
PROBES_RUN = [
    "the a an of to in on at for with by from and or but",
    "he she they we you i his her their our cat dog man woman child",
    "big small good bad old new red blue green happy sad fast slow runs ran",
]
ALIGN_MARGIN = 0.25  # nats


@dataclass
class Check:
    name: str
    passed: bool | None  # None: not applicable (skipped)
    value: float | None
    threshold: str
    detail: str
    seconds: float = 0.0

    @property
    def status(self) -> str:
        return "skip" if self.passed is None else ("pass" if self.passed else "FAIL")


#: the float32 threshold of the logit comparisons (absolute), and how many units in the last place of the model's
#: dtype at the logits' magnitude a comparison may differ by (bf16: 16 x 2^-7 x |logit|)
FLOAT32_TOL = 1e-4
ULPS = 16


def _tol(model, scale: float = 1.0) -> float:
    """The threshold of a logit comparison, scaled with the dtype's precision: ``ULPS`` units in the last place
    at the logits' magnitude ``scale`` (``eps(dtype) x max(1, scale)``), never below the float32 threshold. A
    correct bf16 model's padded and unpadded logits differ by about one unit in the last place (1/16 at |logit|
    8), which an absolute 0.05 called a failure."""
    eps = torch.finfo(model.dtype).eps if model.dtype.is_floating_point else 0.0
    return max(FLOAT32_TOL, ULPS * eps * max(1.0, float(scale)))


def _moves(model, scale: float = 1.0) -> float:
    """The least change that counts as a move: one unit in the last place at the logits' magnitude (positions
    that do not attend to a changed token are computed bit for bit the same), never below the float32
    threshold."""
    eps = torch.finfo(model.dtype).eps if model.dtype.is_floating_point else 0.0
    return max(FLOAT32_TOL, eps * max(1.0, float(scale)))


def _scale(*tensors) -> float:
    """The logits' magnitude: the largest |logit| that is a real value (padded vocabulary rows hold the dtype's
    minimum, which says nothing about precision)."""
    out = 1.0
    for t in tensors:
        v = t.detach().float().abs()
        v = v[torch.isfinite(v) & (v < 1e30)]
        if v.numel():
            out = max(out, float(v.max()))
    return out


def _special_set(tok) -> set[int]:
    ids = {int(t) for t in getattr(tok, "all_special_ids", ())}
    for i, t in (getattr(tok, "added_tokens_decoder", {}) or {}).items():
        if getattr(t, "special", False):
            ids.add(int(i))
    return ids


def check_mask(model) -> Check:
    tok = model.tokenizer
    n, mid = len(tok), model.mask_token_id
    problems = []
    if not 0 <= mid < n:
        problems.append(f"{mid} is outside the tokenizer's {n} tokens")
    elif mid not in _special_set(tok):
        problems.append(f"{mid} is {tok.convert_ids_to_tokens(mid)!r}, not a special token")
    tm = getattr(tok, "mask_token_id", None)
    if tm is not None and tm != mid:
        problems.append(f"the tokenizer's mask token is {tm}")
    if mid in model.eos_token_ids or mid == model.pad_token_id:
        problems.append("it is also an EOS / pad id")
    problems += [w for w in model.load_warnings if "mask id" in w]
    name = tok.convert_ids_to_tokens(mid) if 0 <= mid < n else "?"
    return Check(
        "mask id", not problems, float(mid), "special, agrees", "; ".join(problems) or f"{mid} = {name!r}"
    )


def check_eos(model) -> Check:
    from dlmeval.models.tokens import end_of_turn_ids

    tok = model.tokenizer
    special, n = _special_set(tok), len(tok)
    eos = list(model.eos_token_ids)
    problems = [f"{t} is not a special token" for t in eos if not (0 <= t < n and t in special)]
    if not eos:
        problems.append("no EOS id")
    missing = [t for t in end_of_turn_ids(tok) if t not in eos]
    if missing:
        problems.append(f"the chat template ends a turn with {missing}, not in the EOS set")
    problems += [w for w in model.load_warnings if "EOS" in w]
    names = ", ".join(f"{t}={tok.convert_ids_to_tokens(t)!r}" for t in eos if 0 <= t < n)
    return Check(
        "eos ids", not problems, float(len(eos)), "special, EoT included", "; ".join(problems) or names
    )


def check_pad(model) -> Check:
    n, pid = len(model.tokenizer), model.pad_token_id
    ok = 0 <= pid < n and pid != model.mask_token_id
    return Check(
        "pad id", ok, float(pid), "in tokenizer, not mask", f"{pid}, padding side {model.padding_side}"
    )


def _masked_batch(model, texts, rate: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    seqs = [model.encode(t) for t in texts]
    ids, attn = model.pad(seqs)
    special = _special_set(model.tokenizer)
    real = attn.bool().clone()
    for t in special:
        real &= ids != t
    pick = (torch.rand(ids.shape, generator=g) < rate).to(ids.device) & real
    first = model.offset(attn)
    for b in range(ids.shape[0]):  # at least one masked position per row, never the first real token
        pick[b, first[b]] = False
        if not pick[b].any():
            cand = real[b].nonzero().flatten()
            cand = cand[cand > first[b]]
            if len(cand):
                pick[b, cand[len(cand) // 2]] = True
    x = ids.masked_fill(pick, model.mask_token_id)
    return ids, x, attn, pick


def check_alignment(model, seed: int = 0) -> Check:
    """Mean log p(true token) at masked positions, read at the adapter's alignment and shifted by -1 / +1."""
    rows, margins = [], []
    for name, texts in (("text", PROBES_TEXT), ("run", PROBES_RUN)):
        vals = {-1: [], 0: [], 1: []}
        for rep in range(3):
            ids, x, attn, pick = _masked_batch(model, texts, 0.15, seed + rep)
            logp = torch.log_softmax(model.logits(x, attn), dim=-1)
            bi, pi = pick.nonzero(as_tuple=True)
            for d in (-1, 0, 1):
                src = (pi + d).clamp(0, x.shape[1] - 1)
                vals[d].append(logp[bi, src, ids[bi, pi]])
        m = {d: float(torch.cat(v).mean()) for d, v in vals.items()}
        margins.append(m[0] - max(m[-1], m[1]))
        rows.append(f"{name}: at i {m[0]:.2f}, i-1 {m[-1]:.2f}, i+1 {m[1]:.2f}")
    decisive = max(
        margins, key=abs
    )  # the probe set the model reads best decides (the other may be noise to it)
    ok = decisive >= ALIGN_MARGIN
    return Check("alignment", ok, decisive, f"margin >= {ALIGN_MARGIN} nats", "; ".join(rows))


def check_vocab_padding(model) -> Check:
    n = len(model.tokenizer)
    ids, attn = model.pad([model.encode(PROBES_TEXT[0])])
    z = model.logits(
        ids.masked_fill(
            attn.bool() & (torch.arange(ids.shape[1]) % 3 == 1).to(ids.device), model.mask_token_id
        ),
        attn,
    )
    v = z.shape[-1]
    if v <= n:
        return Check(
            "vocab padding", True, 0.0, "no mass past the tokenizer", f"output {v} = tokenizer {n} ids"
        )
    mass = float(torch.softmax(z, -1)[..., n:].sum(-1).max())
    return Check(
        "vocab padding",
        mass == 0.0,
        mass,
        "mass 0",
        f"output {v} ids for a {n}-token tokenizer: {v - n} masked",
    )


def check_batch(model) -> Check:
    texts = PROBES_TEXT + PROBES_RUN[:1]
    seqs = [model.encode(t) for t in texts]
    ids, attn = model.pad(seqs)
    batched = model.logits(ids, attn)
    worst, scale = 0.0, 1.0
    for i, s in enumerate(seqs):
        a_ids, a_attn = model.pad([s])
        alone = model.logits(a_ids, a_attn)[0][a_attn[0].bool()]
        real = attn[i].bool()
        worst = max(worst, float((batched[i][real] - alone).abs().max()))
        scale = max(scale, _scale(alone))
    tol = _tol(model, scale)
    return Check(
        "batch", worst <= tol, worst, f"max |diff| <= {tol:g}", f"{len(texts)} rows, alone vs batched"
    )


def check_padding(model) -> Check:
    """Logits at the real tokens do not move with the number of pad tokens. Checked on the side dlmeval pads this
    model on (its family's ``padding_side``): that is the only side any caller uses, and an absolute-position
    model (BERT) padded on its other side moves its positions by design, which says nothing about the checkpoint.
    A left-padding family is also checked on the right, so a mask that ignores padding on either side is caught."""
    seqs = [model.encode(t) for t in PROBES_TEXT[:2]]
    sides = ("left", "right") if model.padding_side == "left" else ("right",)
    ref = None
    worst = 0.0
    for side in sides:
        for extra in (0, 7):
            width = max(len(s) for s in seqs) + extra
            ids, attn = model.pad(seqs, length=width, side=side)
            z = model.logits(ids, attn)
            got = [z[i][attn[i].bool()] for i in range(len(seqs))]
            if ref is None:
                ref = got
            else:
                worst = max(worst, max(float((a - b).abs().max()) for a, b in zip(ref, got)))
    tol = _tol(model, _scale(*ref))
    return Check(
        "padding", worst <= tol, worst, f"max |diff| <= {tol:g}", f"{' / '.join(sides)}, +0 / +7 pad tokens"
    )


def check_gradient(model) -> Check:
    ids, attn = model.pad([model.encode(t) for t in PROBES_TEXT[:2]])
    emb = model.input_embeddings()
    e = emb(ids).detach().requires_grad_(True)
    with torch.no_grad():
        plain = model.logits(ids, attn)
    # gradients to the embeddings only: no weight gradients (a 7B model's would need its size again in memory)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        out = model.forward(None, attn, inputs_embeds=e).logits
        pos = attn.bool().clone()
        pos[:, : ids.shape[1] // 2] = False
        sc = model.score_positions(None, attn, pos, ids, inputs_embeds=e, grad=True)
        (sc.logprob.sum() + out[attn.bool()].logsumexp(-1).sum()).backward()
    except TypeError as err:  # the module refused the embeddings keyword
        return Check("gradient", False, None, "finite, non-zero", f"forward(inputs_embeds=) failed: {err}")
    finally:
        for p in params:
            p.requires_grad_(True)
    diff = float((out.detach() - plain).abs().max())
    gnorm = float(e.grad.norm()) if e.grad is not None else 0.0
    tol = _tol(model, _scale(plain[attn.bool()]))
    ok = diff <= tol and math.isfinite(gnorm) and gnorm > 0
    return Check("gradient", ok, gnorm, f"embeds == ids (<= {tol:g}), grad > 0", f"|embeds - ids| {diff:.2e}")


def _probe_changes(model, ids, attn, at: int, reads: list[int]) -> float:
    """Largest change of the logits at positions ``reads`` when the token at ``at`` is replaced."""
    base = model.logits(ids, attn)
    alt = ids.clone()
    cand = [
        t for t in (model.encode("one two three", add_special_tokens=False) or [0]) if t != int(ids[0, at])
    ]
    alt[0, at] = cand[0] if cand else (int(ids[0, at]) + 1) % len(model.tokenizer)
    moved = model.logits(alt, attn)
    return float((moved[0, reads] - base[0, reads]).abs().max()) if reads else 0.0


def _block_probe(model, block: int) -> list[int]:
    """Probe ids spanning at least two whole blocks plus one token (the sentences repeated), within the window."""
    text = " ".join(PROBES_TEXT)
    ids = model.encode(text)
    while len(ids) <= 2 * block and len(ids) < model.max_length:
        ids = model.encode(f"{text} {model.decode(ids, skip_special_tokens=True)}")
    return ids[: model.max_length]


def check_attention(model) -> Check:
    """The attention kind the family declares, probed: a later token must change an earlier position's logits
    (bidirectional), must not (causal), or must only within its own block (block-causal, the **model's**
    ``block_size``, over a probe that spans at least two blocks so a leak across blocks can show; a probe within
    one block fails the row rather than pass it unseen)."""
    from dlmeval.models.family import family_of

    fam = family_of(model)
    kind = fam.attention if fam is not None else "bidirectional"
    block = None
    if kind == "block-causal":
        own = getattr(model, "block_size", None)
        block = int(own if own else (fam.generation or {}).get("block_length", 4))
        seqs = [_block_probe(model, block)]
    else:
        seqs = [model.encode(PROBES_TEXT[0])]
    ids, attn = model.pad(seqs)
    real = attn[0].bool().nonzero().flatten().tolist()
    first, last = real[0], real[-1]
    scale = _scale(model.logits(ids, attn)[0][attn[0].bool()])
    tol, floor = _tol(model, scale), _moves(model, scale)
    early = [p for p in real[:3] if p != last]
    if kind == "block-causal":
        b_last = (last - first) // block
        same_block = [p for p in real if (p - first) // block == b_last and p != last]
        before = [p for p in real if (p - first) // block < b_last]
        if not before:
            return Check(
                "attention", False, None, f"earlier blocks unchanged (<= {tol:g})",
                f"block-causal (block {block}): the probe of {len(real)} tokens fits in one block, so a leak "
                "across blocks cannot show; the model's window is shorter than two blocks",
            )  # fmt: skip
        inside = _probe_changes(model, ids, attn, last, same_block)
        leak = _probe_changes(model, ids, attn, last, before)
        ok = inside > floor and leak <= tol
        return Check(
            "attention",
            ok,
            leak,
            f"earlier blocks unchanged (<= {tol:g}), own block moves (> {floor:g})",
            f"block-causal (model block_size {block}, {b_last + 1} blocks): a changed last token moves its own "
            f"block by {inside:.3g}, earlier blocks by {leak:.3g}"
            + ("" if ok else "; the network does not attend as the family declares"),
        )
    moved = _probe_changes(model, ids, attn, last, early)
    if kind == "causal":
        ok = moved <= tol
        want = f"earlier positions unchanged (<= {tol:g})"
    else:
        ok = moved > floor
        want = f"earlier positions change (> {floor:g})"
    detail = f"{kind}: changing the last token moves the first positions' logits by {moved:.3g}"
    if not ok:
        detail += (
            f"; the network does not attend as the {fam.name if fam else 'declared'} family's {kind} attention "
            "says (a causal checkpoint loaded as a diffusion family, or a wrong attention mask)"
        )
    return Check("attention", ok, moved, want, detail)


#: row name (``dlmeval.models.family.CHECK_ROWS``) -> check
CHECKS = {
    "mask id": check_mask,
    "eos ids": check_eos,
    "pad id": check_pad,
    "alignment": check_alignment,
    "attention": check_attention,
    "vocab padding": check_vocab_padding,
    "batch": check_batch,
    "padding": check_padding,
    "gradient": check_gradient,
}


def run_checks(
    model, *, seed: int = 0, extra: Mapping[str, Callable[[Any], Check]] | None = None
) -> list[Check]:
    """The checks of :data:`CHECKS`, then those of ``extra`` (name -> check), that apply to ``model``'s family
    (``Family.checks``; all of them for an unregistered adapter); an exception inside one check becomes its failed
    row. ``dlmeval check-model`` runs :func:`dlmeval.sampling.checks.run_checks`, which adds the ``sampler`` row:
    that check runs dlmeval's sampler, a layer above this one (#35)."""
    from dlmeval.models.family import family_of

    fam = family_of(model)
    out = []
    for name, fn in {**CHECKS, **(extra or {})}.items():
        if fam is not None and not fam.applies(name):
            continue
        t = time.perf_counter()
        try:
            c = fn(model, seed=seed) if fn is check_alignment else fn(model)
        except Exception as err:  # a check that crashes is a failed check, with the reason
            c = Check(name, False, None, "", f"{type(err).__name__}: {err}")
        c.seconds = time.perf_counter() - t
        out.append(c)
    return out


def as_records(checks: list[Check]) -> list[dict[str, Any]]:
    return [{**asdict(c), "status": c.status} for c in checks]
