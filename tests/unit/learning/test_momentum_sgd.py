"""The attack's hand-stepped SGD is torch.optim.SGD's update to the bit (learning/attribute_mlp.py)."""

from __future__ import annotations

import torch

from learning.attribute_mlp import MomentumSGD, mlp


def test_momentum_sgd_steps_as_torch_sgd_to_the_bit() -> None:
    torch.manual_seed(0)
    ours, theirs = mlp(8, 3), mlp(8, 3)
    theirs.load_state_dict(ours.state_dict())
    start = [p.detach().clone() for p in ours.parameters()]
    step = MomentumSGD(list(ours.parameters()), 0.1, 0.9)
    reference = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    for _ in range(5):
        for net in (ours, theirs):
            net.eval()  # no dropout: the two nets see the same function
            for p in net.parameters():
                p.grad = None
            torch.nn.functional.cross_entropy(net(x), y).backward()
        step()
        reference.step()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a, b)
    assert all(not torch.equal(a, b) for a, b in zip(ours.parameters(), start, strict=True))  # it stepped
