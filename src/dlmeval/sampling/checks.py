"""check-model's ``sampler`` row (:func:`check_sampler`): dlmeval's remasking sampler against the checkpoint's own
``diffusion_generate``. It lives in the sampling layer because it runs the sampler; the model's interface checks
stay in :mod:`dlmeval.models.checks`, which never imports a layer above it, and :func:`run_checks` here is those
checks plus this row (``dlmeval check-model`` runs it, #35)."""

from __future__ import annotations

import torch

from dlmeval.models.checks import PROBES_RUN, PROBES_TEXT, Check
from dlmeval.models.checks import run_checks as _model_checks
from dlmeval.models.family import family_of
from dlmeval.sampling.config import SamplerConfig
from dlmeval.sampling.sampler import RemaskingSampler

#: the nominal step counts the sampler row compares at: one step (the order does not matter), and more, where
#: the unmasking order does and a top-k the checkpoint's sampler inherits from its config would show
SAMPLER_STEPS = (1, 3, 8)


def no_mass_hook(model):
    """A ``generation_logits_hook_func(step, x, logits)`` for a checkpoint's own ``diffusion_generate`` (Dream's)
    that gives the ids dlmeval's sampler never samples no mass: the vocabulary padding past the tokenizer and the
    mask id (a copy of the logits, at the dtype's minimum there)."""
    n_tok, banned = len(model.tokenizer), int(model.mask_token_id)

    def hook(step, x, logits):
        logits = logits.clone()
        logits[..., n_tok:] = torch.finfo(logits.dtype).min
        logits[..., banned] = torch.finfo(logits.dtype).min
        return logits

    return hook


def check_sampler(model, length: int = 8) -> Check:
    """dlmeval's sampler against the checkpoint's own ``diffusion_generate`` at temperature 0, for each of the
    family's native algorithms at :data:`SAMPLER_STEPS`, called with an explicit ``top_k=None`` / ``top_p=None``
    on a copy of the checkpoint's generation config (the generation config dlmeval reproduces) and a logits hook that gives the ids dlmeval never samples (the
    mask, the vocabulary padding) no mass, as dlmeval does. The same call with plain keywords is reported too:
    where it differs, the checkpoint's sampler inherits settings (Dream: ``top_k=50`` from the model config)."""
    gen = getattr(model.module, "diffusion_generate", None)
    if not callable(gen):
        return Check("sampler", None, None, "same tokens", "the checkpoint ships no sampler of its own")
    fam = family_of(model)
    native = dict(fam.native_samplers) if fam is not None else {}
    native = {k: v for k, v in native.items() if k != "origin"} or {
        "maskgit_plus": "maskgit",
        "entropy": "entropy",
    }
    prompts = [model.encode(PROBES_RUN[0]), model.encode(PROBES_TEXT[2])]
    ids, attn = model.pad(prompts)
    hook = no_mass_hook(model)

    def theirs(alg, steps, explicit):
        kw = dict(max_new_tokens=length, steps=steps, alg=alg, temperature=0.0, alg_temp=None)
        if explicit:  # the generation config dlmeval reproduces: the checkpoint's, with these settings
            kw.update(top_k=None, top_p=None, generation_config=_explicit_generation_config(model))
        with torch.no_grad():
            out = gen(ids, attention_mask=attn, generation_logits_hook_func=hook, **kw)
        return getattr(out, "sequences", out)[:, ids.shape[1] :].cpu()

    rows, inherited = [], []
    plain_error: str | None = None
    same = total = 0
    for alg, strategy in native.items():
        for steps in SAMPLER_STEPS:
            cfg = SamplerConfig(
                length=length,
                steps=steps,
                strategy=strategy,
                temperature=0.0,
                stop_at_eos=False,
                schedule=None,
            )
            res = RemaskingSampler(model, cfg).sample(
                prompts, item_ids=[f"p{i}" for i in range(len(prompts))]
            )
            ours = torch.as_tensor(res.tokens)[:, :length].cpu()
            ref = theirs(alg, steps, explicit=True)
            eq = int((ours == ref).sum())
            same, total = same + eq, total + ours.numel()
            rows.append(f"{alg}@{steps}: {eq}/{ours.numel()}")
            if steps > 1 and alg not in inherited and plain_error is None:
                try:
                    if not torch.equal(theirs(alg, steps, False), ref):
                        inherited.append(alg)
                except (
                    Exception
                ) as err:  # the checkpoint's own code fails on a plain call (Dream, transformers 4.57)
                    plain_error = f"{type(err).__name__}: {err}"
    detail = "; ".join(rows) + " tokens equal vs diffusion_generate(top_k=None, top_p=None), temperature 0"
    if inherited:
        cfg = getattr(model.module, "config", None)
        detail += (
            f"; called with plain keywords it samples differently ({', '.join(inherited)}): it inherits "
            f"top_k={getattr(cfg, 'top_k', '?')} / top_p={getattr(cfg, 'top_p', '?')} from the model config, "
            "which dlmeval does not reproduce unless the spec sets them"
        )
    if plain_error:
        detail += f"; called with plain keywords (no generation_config) it fails: {plain_error}"
    return Check("sampler", same == total, same / max(total, 1), "1.0 (token for token)", detail)


def _explicit_generation_config(model):
    """A copy of the checkpoint's own generation config with the mask id set (Dream's released
    ``generation_config.json`` has ``mask_token_id: null``, and ``diffusion_generate`` given a config takes the
    mask from it)."""
    import copy

    gc = copy.deepcopy(getattr(model.module, "generation_config", None))
    if gc is not None and getattr(gc, "mask_token_id", None) is None:
        gc.mask_token_id = int(model.mask_token_id)
    return gc


def run_checks(model, *, seed: int = 0) -> list[Check]:
    """Every check-model row that applies to ``model``'s family: the interface checks of
    :func:`dlmeval.models.checks.run_checks`, then ``sampler``."""
    return _model_checks(model, seed=seed, extra={"sampler": check_sampler})
