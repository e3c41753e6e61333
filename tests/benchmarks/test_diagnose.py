import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from loaders.diagnose import Diagnose, recommend


class SlowLoader:
    """A loader that takes `delay` seconds to produce each batch; batches encode their index."""

    def __init__(self, n, delay):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            time.sleep(self.delay)
            yield torch.full((4, 3), i), torch.arange(4)


def train(loader, compute_s, epochs=1):
    seen = []
    for _ in range(epochs):
        for images, _labels in loader:
            seen.append(int(images[0, 0]))
            time.sleep(compute_s)
    return seen


def test_slow_loader_is_data_bound():
    diag = Diagnose(SlowLoader(20, delay=0.03))
    seen = train(diag, compute_s=0.002)
    res = diag.report()
    assert seen == list(range(20))  # batches pass through unchanged, in order
    assert res.bound == "data"
    assert res.data_wait_share > 0.5
    assert res.steps == 18  # 20 steps minus 2 warm-up
    assert res.samples_per_s is not None and res.samples_per_s > 0
    text = res.text()
    assert "data-bound" in text and "->" in text
    assert res.recommendation


def test_fast_loader_is_compute_bound():
    diag = Diagnose(SlowLoader(20, delay=0.0))
    train(diag, compute_s=0.03)
    res = diag.report()
    assert res.bound == "compute"
    assert res.data_wait_share < 0.3
    assert "keeps up" in res.recommendation[0]


def test_wraps_a_real_dataloader_over_several_epochs_and_reads_its_settings(capsys):
    ds = TensorDataset(torch.arange(64).float().view(64, 1), torch.arange(64))
    dl = DataLoader(ds, batch_size=8, num_workers=0)
    with Diagnose(dl, warmup_steps=1) as diag:
        assert len(diag) == 8
        for _ in range(2):
            for x, y in diag:
                assert torch.equal(x[:, 0].long(), y)
    res = diag.report()
    assert res.steps == 15
    res.print()
    assert "nostall diagnosis over 15 steps" in capsys.readouterr().out
    assert diag.num_workers == 0  # attribute access passes through to the DataLoader


def test_recommendations_follow_the_measured_reason():
    base = dict(num_cpus=8, has_gpu=False)
    saturated = recommend("data", 0.6, 97.0, loader={"num_workers": 7}, **base)
    assert "precompute a store" in saturated[0] and "97%" in saturated[0]
    idle = recommend("data", 0.6, 20.0, loader={"num_workers": 2, "prefetch_factor": 2}, **base)
    assert "raise num_workers from 2 to 7" in idle[0]
    matched = recommend("data", 0.5, 40.0, loader={"num_workers": 7, "prefetch_factor": 2},
                        **base)
    assert "prefetch_factor" in matched[0]
    gpu = recommend("data", 0.6, 97.0, loader={}, num_cpus=8, has_gpu=True)
    assert any("decode on the GPU" in r for r in gpu)
    assert "keeps up" in recommend("compute", 0.05, 50.0, loader={}, **base)[0]


class LockstepLoader:
    """Every 4th batch stalls, like 4 workers that finish their batches together."""

    def __iter__(self):
        for i in range(64):
            time.sleep(0.02 if i % 4 == 0 else 0.0)
            yield torch.full((2, 3), i)


def test_recurring_stalls_are_reported_with_their_period():
    diag = Diagnose(LockstepLoader(), warmup_steps=0)
    train(_pairs(diag), compute_s=0.002)
    res = diag.report()
    assert res.wait_period_steps == 4
    assert "every 4 steps" in res.text()


def _pairs(loader):
    for x in loader:
        yield x, x
