"""check-model's padding row: pads on the side dlmeval uses for the model, and still catches a model whose
attention ignores the padding mask."""

from dlmeval.models import load_diffusion
from dlmeval.models.checks import check_padding


def test_right_padded_bert_passes_on_its_own_side_and_a_mask_ignoring_model_fails():
    m = load_diffusion("tiny-bert")
    assert m.padding_side == "right"
    row = check_padding(m)
    assert row.passed and row.detail == "right, +0 / +7 pad tokens"

    inner = m.logits

    def ignore_mask(ids, attn, **kw):  # a broken checkpoint: attends to its pad tokens
        return inner(ids, attn.new_ones(attn.shape), **kw)

    m.logits = ignore_mask
    broken = check_padding(m)
    assert broken.passed is False and broken.value > 1e-4
