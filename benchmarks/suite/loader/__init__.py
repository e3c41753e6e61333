"""``python -m benchmarks.suite.loader``: StoreLoader's read side (:mod:`.bench`).

:mod:`.choosing` is its section 6: subsets, weighted draws and mixtures against the plain loader.
"""
