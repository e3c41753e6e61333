"""The ``model`` consumer's small networks, one shape per task.

Each is a few convolution blocks, so that a step costs what a small real model's does on the
batch the strategy served (segmentation a U-Net, landmarks a point regressor, detection a
centre heatmap, audio a 2-D net on log-mel or a 1-D net on waveforms, spectral patches a
2-D net over the bands). They train: their losses go down on data with a signal.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["ConvNet", "HeatmapNet", "UNet", "WaveNet", "block"]


def block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    """A 3x3 convolution, batch norm and ReLU."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class ConvNet(nn.Module):
    """``[B, C, H, W] -> [B, outputs]``: strided conv blocks, global pooling, a linear head.

    Args:
        channels: Input channels.
        outputs: Output features (classes, or 2 x points).
        width: Channels of the first block (doubled by each next one).
        strides: Stride of each block (1 keeps small inputs such as 9 x 9 patches whole).
    """

    def __init__(
        self, channels: int, outputs: int, width: int = 32, strides: tuple[int, ...] = (2, 2, 2)
    ) -> None:
        super().__init__()
        layers, cin = [], channels
        for i, stride in enumerate(strides):
            layers.append(block(cin, width << i, stride))
            cin = width << i
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(cin, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``[B, outputs]``."""
        out: torch.Tensor = self.head(torch.flatten(self.features(x), 1))
        return out


class UNet(nn.Module):
    """A two-level U-Net: ``[B, C, H, W] -> [B, classes, H, W]`` (H, W divisible by 4)."""

    def __init__(self, channels: int, classes: int, width: int = 16) -> None:
        super().__init__()
        w = width
        self.down1, self.down2 = block(channels, w), block(w, 2 * w, 2)
        self.bottom = block(2 * w, 4 * w, 2)
        self.up2, self.up1 = block(6 * w, 2 * w), block(3 * w, w)
        self.head = nn.Conv2d(w, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return per-pixel class logits."""
        d1 = self.down1(x)
        d2 = self.down2(d1)
        b = self.bottom(d2)
        u2 = self.up2(torch.cat([F.interpolate(b, size=d2.shape[-2:]), d2], 1))
        u1 = self.up1(torch.cat([F.interpolate(u2, size=d1.shape[-2:]), d1], 1))
        out: torch.Tensor = self.head(u1)
        return out


class HeatmapNet(nn.Module):
    """``[B, 3, H, W] -> [B, classes, H / 4, W / 4]``: a centre heatmap per class (detection)."""

    def __init__(self, channels: int, classes: int, width: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(
            block(channels, width, 2), block(width, 2 * width, 2), block(2 * width, 2 * width)
        )
        self.head = nn.Conv2d(2 * width, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return heatmap logits at stride 4."""
        out: torch.Tensor = self.head(self.body(x))
        return out


class WaveNet(nn.Module):
    """``[B, L]`` or ``[B, C, L]`` waveforms -> ``[B, classes]``: strided 1-D convolutions."""

    def __init__(self, channels: int, classes: int, width: int = 32) -> None:
        super().__init__()
        layers, cin = [], channels
        for i, (kernel, stride) in enumerate(((80, 16), (3, 4), (3, 4))):
            cout = width << i
            layers += [nn.Conv1d(cin, cout, kernel, stride), nn.BatchNorm1d(cout), nn.ReLU(True)]
            cin = cout
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool1d(1))
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits."""
        x = x.unsqueeze(1) if x.dim() == 2 else x
        out: torch.Tensor = self.head(torch.flatten(self.features(x), 1))
        return out
