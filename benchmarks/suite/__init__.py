"""The per-issue benchmarks: ``python -m benchmarks.suite.NAME [--json PATH]``.

Each module defines its data set-up, its rows and the ratios it reports; the timing, the
turns between rows, CPU and peak RSS, the table and the JSON are :mod:`benchmarks.runner`'s.
"""
