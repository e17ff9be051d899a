"""What this lesson's checks run most, run once in each judge's zygote before it forks workers.

The operations of the checks (the device checks' too, on the simulated GPU), so their first-call costs (kernel
lookups, lazily built tables) are paid once. Their shapes are their own: no shape here is one a hidden test uses
(``tests/test_visibility.py`` checks), since this text reaches the zygote, whose memory every worker inherits.
The zygote runs this file's text (sent by the judge) with ``warm_up(torch, on_fake_device)``; it imports
nothing of the kit.
"""


def warm_up(torch, on_fake_device):
    x = torch.ones(3, 7, 20, requires_grad=True)
    scores = torch.softmax(x @ x.transpose(-2, -1), dim=-1).masked_fill(torch.zeros(7, 7, dtype=torch.bool), 0)
    (scores.unflatten(-1, (7, 1)).flatten(-2).sum() + torch.stack((x.sin(), x.cos()), -1).sum()).backward()

    def fake(x):  # projections, views, indexing, masking with a CPU scalar
        heads = (x[:, :7] @ torch.ones(20, 20, device=x.device)).unflatten(-1, (5, 4)).transpose(1, 2)  # (3, 5, 7, 4)
        scores = heads @ heads.transpose(-2, -1) / 2.0
        mask = torch.ones(7, 7, dtype=torch.bool, device=x.device).tril()
        weights = scores.masked_fill(~mask, torch.tensor(-1.0)).softmax(-1)
        return (weights @ heads).transpose(1, 2).reshape(3, 7, 20) + x[:, :7], torch.stack((x.sin(), x.cos()), -1)

    on_fake_device(fake, (torch.ones(3, 9, 20),), {})

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (torch.nn.Linear(20, 20) for _ in range(4))

        def forward(self, x, mask=None):
            q, k, v = (layer(x).unflatten(-1, (5, 4)).transpose(1, 2) for layer in (self.q, self.k, self.v))
            scores = (q / 2.0) @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(-1)
            return self.o((weights @ v).transpose(1, 2).flatten(2)), weights

    x = torch.ones(3, 7, 20)
    for mask in (None, torch.ones(7, 7, dtype=torch.bool).tril()):
        on_fake_device(Attention(), (x,), {"mask": mask})
