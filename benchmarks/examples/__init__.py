"""Examples that run on a CPU: small generated datasets, a real build, a short training run.

``python -m benchmarks.examples.audio``: an audio classifier on a log-mel store.
"""
