"""The ``audio`` kind's old import path: the kind lives in :mod:`precompute.kinds.audio`."""

from precompute.kinds.audio import AudioKind, AudioValue, clip_frames, decode_audio_field

__all__ = ["AudioKind", "AudioValue", "clip_frames", "decode_audio_field"]
