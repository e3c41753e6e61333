"""The image workloads' input as the build stores it: its channels and its bit depth.

A source built with ``--channels 1`` stores one grey channel, and with ``--bit-depth 16``
16-bit pixels (``uint16``: X-rays, CT slices kept at their own depth). Every strategy serves
the input as stored, ``[B, C, S, S]`` normalised, C its channels (16-bit pixels scaled by
255/65535 first, as the store loaders scale them), and the reports name the form
(:attr:`PixelForm.text`). A raw-file engine that decodes one form only (DALI's ``JpegLoader``:
three 8-bit channels) is not applicable to another, and says so (:meth:`PixelForm.refuse`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.errors import NotApplicable
from benchmarks.harness.workloads import Workload

__all__ = ["ImageWorkload", "PixelForm"]


@dataclass(frozen=True)
class PixelForm:
    """An image field's stored pixels.

    Attributes:
        channels: 1 (grey) or 3.
        bits: 8 (uint8) or 16 (uint16).
    """

    channels: int = 3
    bits: int = 8

    @classmethod
    def of(cls, field: Any) -> PixelForm:
        """The form of an image :class:`~precompute.fields.FieldSpec` (its options)."""
        opts = field.options
        return cls(int(opts.get("channels", 3)), int(opts.get("bit_depth", 8)))

    @property
    def text(self) -> str:
        """``1 channel, 16-bit`` / ``3 channels, 8-bit``."""
        return f"{self.channels} channel{'s' if self.channels > 1 else ''}, {self.bits}-bit"

    def refuse(self, engine: str, serves: PixelForm | None = None) -> None:
        """Refuse ``engine``, which decodes ``serves`` only (default: 3 channels, 8-bit).

        Raises:
            NotApplicable: The stored form is another, naming both.
        """
        serves = serves or PixelForm()
        if self != serves:
            raise NotApplicable(
                f"{engine} decodes images to {serves.text} only, and this source's images are "
                f"stored {self.text} (--channels {self.channels} --bit-depth {self.bits}), the "
                "form every other strategy serves"
            )


class ImageWorkload(Workload):
    """A workload whose input is an image field (its first kind is ``image``)."""

    @property
    def pixels(self) -> PixelForm:
        """The input's stored form."""
        return PixelForm.of(self.plan.field_spec(self.input))

    @property
    def channels(self) -> int:
        """The input's channels."""
        return self.pixels.channels

    @property
    def stored(self) -> str:
        """``image 64 x 64 px, 1 channel, 16-bit`` (width x height)."""
        return f"{super().stored}, {self.pixels.text}"

    def has_engine(self, name: str) -> bool:
        """Its raw-file pipelines, but DALI's (``gpu-decode``) for square 3-channel 8-bit only."""
        dali = self.pixels == PixelForm() and isinstance(self.size, int)
        return (name != "gpu-decode" or dali) and super().has_engine(name)

    def image_text(self) -> str:
        """What a batch holds of the input: ``image float32 [B, C, H, W] normalised``."""
        h, w = self.hw
        return f"{self.input} float32 [B, {self.channels}, {h}, {w}] normalised"
