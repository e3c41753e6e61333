"""Named splits of a store without copying it: the rule, its assignment and its record.

``assign`` deals samples into named parts (fractions, seed, stratified, grouped: a pure
function of the keys); ``record`` is the split recorded with a store (``_nostall/splits.json``,
one atomic write); ``manifest`` reads a manifest's ``split`` column (honoured at build time)
and group columns; ``build`` records the split column with the store a build writes. Loaders
serve a part with ``split="val"`` (``docs/loaders.md``, "Choosing samples").
"""

from precompute.splits.assign import NONE, Split, assign, key_groups
from precompute.splits.record import SPLITS_FILE, RecordedSplits, read_splits, write_splits

__all__ = [
    "NONE",
    "SPLITS_FILE",
    "RecordedSplits",
    "Split",
    "assign",
    "key_groups",
    "read_splits",
    "write_splits",
]
