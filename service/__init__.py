"""service: the cache of built stores, keyed by (source fingerprint, build spec)."""
