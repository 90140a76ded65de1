"""The lazy ``no_grad`` of the models layer (#36): torch's ``no_grad`` around the call, torch imported at call time."""

from __future__ import annotations

import torch

from dlmeval.models.devices import no_grad


def test_no_grad_disables_autograd_inside_the_call_only():
    w = torch.ones(3, requires_grad=True)

    @no_grad
    def scaled(x, *, k=2.0):
        """Doc kept."""
        return (w * x * k, torch.is_grad_enabled())

    out, enabled = scaled(torch.ones(3), k=3.0)
    assert not enabled and not out.requires_grad and out.tolist() == [3.0, 3.0, 3.0]
    assert torch.is_grad_enabled()  # restored after the call
    assert (w * 2).requires_grad
    assert scaled.__name__ == "scaled" and scaled.__doc__ == "Doc kept."


def test_no_grad_restores_autograd_when_the_call_raises():
    @no_grad
    def boom():
        raise ValueError("x")

    try:
        boom()
    except ValueError:
        pass
    assert torch.is_grad_enabled()
