"""Host batches (numpy) -> tensors on the device.

On the CPU this is ``torch.from_numpy``: no copy. On CUDA each array already in pinned memory
(the image batch: the loader's reader writes it into pinned buffers) is copied to the device as
is; the others (labels, indices: a few bytes) are first staged into pinned buffers of the slot.
Copies are ``non_blocking=True`` on a side stream, one batch ahead of the consumer. A slot keeps
its batch's host arrays referenced until the slot is reused, after the event of its copy
fired, so no host buffer is rewritten while its copy may still be running. The consumer's
stream waits on that batch's event and the tensors are ``record_stream``-ed so the caching
allocator does not reuse them early. No host sync besides waiting for a slot's previous copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from loaders.batching.nodes import Node

__all__ = ["ToDevice"]

DeviceBatch = dict[str, torch.Tensor]


class _Slot:
    """One batch in flight: staging buffers, its host arrays, the event of its last copy."""

    def __init__(self) -> None:
        self.buffers: dict[str, torch.Tensor] = {}
        self.held: dict[str, np.ndarray] = {}  # the source arrays, until this copy is done
        self.copied = torch.cuda.Event(blocking=True)  # synchronize() sleeps, not spins

    def pinned(self, key: str, value: np.ndarray) -> torch.Tensor:
        buf = self.buffers.get(key)
        want = torch.from_numpy(value[:0]).dtype
        if buf is None or tuple(buf.shape) != value.shape or buf.dtype != want:
            buf = torch.empty(value.shape, dtype=want, pin_memory=True)
            self.buffers[key] = buf
        return buf


class ToDevice(Node[DeviceBatch]):
    """Move each host batch of ``source`` to ``device``.

    Args:
        source: Node yielding dicts of numpy arrays.
        device: Target device.
        slots: Batches in flight on CUDA + 1 (each holds its host arrays until reused).
        decoders: On CUDA, arrays that reach the device by a decoder instead of a copy, by
            name: ``decoder(host array, side stream) -> device tensor``
            (:mod:`loaders.transfer.devicedecode`).
    """

    SLOTS = 3

    def __init__(
        self,
        source: Node[dict[str, np.ndarray]],
        device: torch.device,
        slots: int = SLOTS,
        decoders: Mapping[str, Any] | None = None,
    ) -> None:
        if slots < 2:
            raise ValueError(f"slots must be >= 2 (one batch in flight, one served), got {slots}")
        self.source, self.device = source, torch.device(device)
        self._cuda = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(self.device) if self._cuda else None
        self._slots = [_Slot() for _ in range(slots)] if self._cuda else []
        self._launched = 0
        self._decoders = dict(decoders or {}) if self._cuda else {}
        self._ahead: tuple[DeviceBatch, dict[str, Any], Any] | BaseException | None = None
        self._state: dict[str, Any] = {}

    def reset(self, state: Mapping[str, Any] | None = None) -> None:
        """Reset the source to ``state``; drop a batch copied ahead."""
        self.source.reset(state)
        self._ahead, self._state = None, self.source.get_state()

    def get_state(self) -> dict[str, Any]:
        """Return the source's state after the last batch returned."""
        return dict(self._state)

    def next(self) -> DeviceBatch:
        """Return the next batch on the device."""
        if not self._cuda:
            batch = self.source.next()
            self._state = self.source.get_state()
            if self.device.type == "cpu":  # the host arrays as tensors, shared, not copied
                return {k: torch.from_numpy(v) for k, v in batch.items()}
            return {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}
        current = self._ahead if self._ahead is not None else self._launch_or_error()
        if isinstance(current, BaseException):
            self._ahead = None
            raise current
        self._ahead = self._launch_or_error()  # start copying the next batch now
        out, self._state, copied = current
        consumer = torch.cuda.current_stream(self.device)
        consumer.wait_event(copied)
        for tensor in out.values():
            tensor.record_stream(consumer)
        return out

    def _launch_or_error(self) -> tuple[DeviceBatch, dict[str, Any], Any] | BaseException:
        try:
            return self._launch()
        except (StopIteration, Exception) as exc:  # re-raised when the consumer gets there
            return exc

    def _launch(self) -> tuple[DeviceBatch, dict[str, Any], Any]:
        batch = self.source.next()
        state = self.source.get_state()
        slot = self._slots[self._launched % len(self._slots)]
        self._launched += 1
        slot.copied.synchronize()  # this slot's last copy is done: its buffers are free again
        slot.held = batch  # keep this batch's host arrays unreused until its copy is done
        out = {}
        with torch.cuda.stream(self._stream):
            for key, value in batch.items():
                if key in self._decoders:  # decoded on the device, on this stream
                    out[key] = self._decoders[key](value, self._stream)
                    continue
                host = torch.from_numpy(value)
                if not host.is_pinned():  # small arrays: stage them
                    host = slot.pinned(key, value)
                    host.numpy()[...] = value
                out[key] = host.to(self.device, non_blocking=True)
            slot.copied.record(self._stream)
        return out, state, slot.copied

    def close(self) -> None:
        """Wait for copies still in flight (their host buffers go back to the pool), close."""
        self._ahead = None
        for slot in self._slots:
            slot.copied.synchronize()
            slot.held = {}
        self.source.close()
