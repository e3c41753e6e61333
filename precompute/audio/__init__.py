"""Audio sources and the store format v2 kind ``audio`` (wired into ``precompute build``).

:mod:`~precompute.audio.decode` decodes any soundfile format from memory, mixes the channels
and resamples with soxr; :mod:`~precompute.audio.clips` cuts fixed-length clips, windows and
manifest segments; :mod:`~precompute.audio.features` computes the log-mel spectrogram with
torch and converts waveforms to and from int16; :mod:`~precompute.audio.kind` declares the
``audio`` field kind and its decoder (registered when :mod:`precompute.fields` is imported);
:mod:`~precompute.audio.source` lists class folders and manifests of audio files. Rules:
``docs/audio.md``.
"""
