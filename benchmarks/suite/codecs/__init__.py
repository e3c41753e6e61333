"""``python -m benchmarks.suite.codecs``: bytes, decode speed and slow links.

:mod:`.bench` (bytes per sample, zstd on other fields, CPU decode against FFCV) and
:mod:`.capped` (the raw and the JPEG store behind a 150 MB/s link: tc on a network namespace's
loopback).
"""
