"""dlmeval.sampling.checks: the logits hook that makes a checkpoint's own sampler sample what dlmeval's can."""

from __future__ import annotations

import torch

from dlmeval.models import tiny_model
from dlmeval.sampling.checks import no_mass_hook


def test_no_mass_hook_removes_the_padding_and_the_mask_only():
    m = tiny_model("dream")
    n, mask = len(m.tokenizer), int(m.mask_token_id)
    logits = torch.randn(2, 5, n + 3, generator=torch.Generator().manual_seed(0))
    before = logits.clone()
    out = no_mass_hook(m)(0, None, logits)
    assert torch.equal(logits, before)  # the hook works on a copy
    low = torch.finfo(out.dtype).min
    assert (out[..., n:] == low).all() and (out[..., mask] == low).all()
    keep = torch.ones(n + 3, dtype=torch.bool)
    keep[n:], keep[mask] = False, False
    assert int(keep.sum()) == n - 1 and torch.equal(out[..., keep], before[..., keep])
