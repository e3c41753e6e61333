"""Runnable examples of the README (``python -m benchmarks.examples.NAME``)."""
