"""Examples that run on a CPU: small real datasets, a real build, a Lightning training loop.

``python -m benchmarks.examples.segmentation`` and ``python -m benchmarks.examples.landmarks``;
``--quick`` runs each with tiny settings (the smoke tests do).
"""
