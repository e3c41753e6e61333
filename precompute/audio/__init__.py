"""Audio building blocks (store format v2 kind ``audio``; not wired into the build yet).

:mod:`~precompute.audio.decode` decodes any soundfile format from memory, mixes the channels
and resamples with soxr; :mod:`~precompute.audio.clips` cuts fixed-length clips, windows and
manifest segments; :mod:`~precompute.audio.features` computes the log-mel spectrogram with
torch and converts waveforms to and from int16; :mod:`~precompute.audio.kind` declares the
``audio`` field kind (importing it registers the kind). Rules: ``docs/audio.md``.
"""
