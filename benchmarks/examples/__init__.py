"""Runnable examples of the README (``python -m benchmarks.examples.NAME``) that run on a CPU.

Each generates a small dataset, builds a store with a real build and trains briefly from it:
``segmentation`` (a Lightning U-Net, Dice per class), ``landmarks`` (heatmaps, mean radial
error), ``audio`` (a classifier on a log-mel store), ``spectral`` (a patch classifier on a
synthetic hyperspectral scene), ``detection`` (a centre-heatmap detector on a boxes store built
from a COCO file). ``segmentation``, ``landmarks`` and ``detection`` take ``--quick`` (tiny
settings, as their smoke tests run them).
"""
