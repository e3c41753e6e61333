"""The training step each feed drives: a bf16 ResNet-50 where it can run, else the small net.

``resnet50``: torchvision's ResNet-50 (random weights: nothing is downloaded), channels-last,
autocast to bfloat16, SGD with momentum, synchronised at the end of each step so its compute
time is real. ``tiny``: :class:`benchmarks.harness.consumers.ModelStep` (a three-block
CNN). ``auto`` picks ``resnet50`` on CUDA where torchvision imports, else ``tiny``.
"""

from __future__ import annotations

import importlib.util

import torch
from torch import nn

from benchmarks.harness.consumers import Consumer, ModelStep, NoConsumer

__all__ = ["MODELS", "ResNetStep", "make_consumer", "pick_model"]

MODELS = ("auto", "resnet50", "tiny", "none")


class ResNetStep:
    """One ResNet-50 training step on a batch of images and (soft) targets.

    Args:
        num_classes: Output classes.
        device: The training device.
    """

    name = "resnet50"

    def __init__(self, num_classes: int, device: torch.device) -> None:
        from torchvision.models import resnet50

        self.device = device
        model = resnet50(weights=None, num_classes=num_classes).to(device)
        self.model = model.to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.last_loss: float | None = None

    def __call__(self, images: torch.Tensor, targets: torch.Tensor) -> None:
        """Train on one batch and wait for it to finish."""
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            logits = self.model(images.contiguous(memory_format=torch.channels_last))
        loss = nn.functional.cross_entropy(logits.float(), targets)
        loss.backward()
        self.opt.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.last_loss = float(loss.detach())


def pick_model(model: str, device: torch.device) -> tuple[str, str]:
    """Resolve ``auto``; return the model and why it was chosen."""
    if model != "auto":
        return model, "asked for"
    if device.type != "cuda":
        return "tiny", "no CUDA: the small net (a ResNet-50 step on the CPU takes seconds)"
    if importlib.util.find_spec("torchvision") is None:
        return "tiny", "torchvision does not import: the small net"
    return "resnet50", "CUDA and torchvision"


def make_consumer(model: str, num_classes: int, device: torch.device) -> Consumer:
    """Return the step for ``model`` (one of :data:`MODELS` but ``auto``)."""
    if model == "resnet50":
        return ResNetStep(num_classes, device)
    if model == "tiny":
        return ModelStep(num_classes, device)
    if model == "none":
        return NoConsumer(device)
    raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
