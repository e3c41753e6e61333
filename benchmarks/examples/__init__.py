"""Runnable examples of the README (``python -m benchmarks.examples.NAME``) that run on a CPU.

Each generates a small dataset, builds a store with a real build and trains briefly from it:
``audio`` (a classifier on a log-mel store), ``spectral`` (a patch classifier on a synthetic
hyperspectral scene).
"""
