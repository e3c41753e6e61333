"""Spectral cubes and other N-D arrays: building blocks of the ``array`` kind (issue 14).

Readers of array files (:mod:`.readers`, :mod:`.matfiles`), per-band resampling and placement
(:mod:`.resample`), scene + ground truth patches and a block split (:mod:`.scene`), per-band
statistics folded from per-shard partials (:mod:`.stats`) and a lister of array folders and
manifests (:mod:`.sources`). Not wired into the build yet: see ``docs/arrays.md``.
"""
