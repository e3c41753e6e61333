"""Audio policies: ``AudioAugment`` (policy), its ops, and its place in a store's fields."""
