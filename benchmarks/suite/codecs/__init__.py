"""``python -m benchmarks.suite.codecs``: bytes, decode speed and slow links (:mod:`.bench`)."""
