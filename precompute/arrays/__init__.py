"""Spectral cubes and other N-D arrays: building blocks of the ``array`` kind (issue 14).

Readers of array files (:mod:`.readers`, :mod:`.matfiles`), per-band resampling and placement
(:mod:`.resample`), scene + ground truth patches and a block split (:mod:`.scene`), per-band
statistics folded from per-shard partials (:mod:`.stats`, :mod:`.bandstats`), listers of array
folders and manifests (:mod:`.sources`, :mod:`.buildsrc`) and of scenes (:mod:`.scenesrc`);
``precompute.fields`` names the ``array`` decoder and build rule (lazy imports of this
package). Rules: ``docs/arrays.md``.
"""
