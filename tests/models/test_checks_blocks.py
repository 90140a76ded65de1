"""check-model's block-causal row reads the model's own block size over a probe of several blocks, so a model that
leaks across blocks FAILs; its logit comparisons scale with the dtype's precision, so a correct bf16 model passes
(#34)."""

from __future__ import annotations

import functools

import pytest
import torch

from dlmeval.models import load_diffusion
from dlmeval.models.checks import check_attention
from dlmeval.sampling.checks import run_checks


def test_a_block_model_that_leaks_across_blocks_fails_check_model():
    from dlmeval.models.a2d import A2DLM

    m = load_diffusion("tiny-a2d-bd3lm")
    good = check_attention(m)
    assert good.passed and good.value == 0.0
    assert f"model block_size {m.block_size}" in good.detail and m.block_size != 32  # not the sampler's 32
    leaky = load_diffusion("tiny-a2d-bd3lm")
    leaky._run = functools.partial(A2DLM._run, leaky)  # the same network, attending across blocks
    bad = check_attention(leaky)
    assert bad.passed is False and bad.value > 1e-3
    assert "does not attend as the family declares" in bad.detail
    rows = {c.name: c for c in run_checks(leaky)}
    assert rows["attention"].passed is False


def test_a_block_probe_within_one_block_fails_rather_than_passes_unseen():
    m = load_diffusion("tiny-a2d-bd3lm")
    m.block_size = 10_000  # longer than any probe the window holds
    row = check_attention(m)
    assert row.passed is False and "cannot show" in row.detail


@pytest.mark.parametrize("kind", ["tiny-llada", "tiny-a2d-bd3lm"])
def test_a_correct_bf16_model_passes_the_logit_rows(kind):
    m = load_diffusion(kind)
    m.module.to(torch.bfloat16)
    m.dtype = torch.bfloat16
    rows = {c.name: c for c in run_checks(m)}
    assert all(c.passed is not False for c in rows.values()), {
        n: c.detail for n, c in rows.items() if not c.passed
    }
    # bf16 rounding is really there (one unit in the last place and more), and an absolute 0.05 failed it
    assert rows["batch"].value > 0.05 or rows["padding"].value > 0.05 or kind != "tiny-llada"
    assert (
        float(rows["batch"].threshold.split("<=")[1]) < 2.0
    )  # 16 ulps at the logits' magnitude, not "anything"
    # a real padding bug still fails in bf16: attending to the pad tokens moves the logits by far more
    inner = m.logits
    m.logits = lambda ids, attn, **kw: inner(ids, attn.new_ones(attn.shape), **kw)
    assert {c.name: c for c in run_checks(m)}["padding"].passed is False
