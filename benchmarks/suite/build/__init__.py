"""``python -m benchmarks.suite.build``: ``precompute build`` against a bare Pillow pool.

:mod:`.bench` defines the sections (throughput with Ray up, end to end in fresh processes,
joining a running Ray, peak RSS); :mod:`.fresh` is what runs in the fresh processes.
"""
