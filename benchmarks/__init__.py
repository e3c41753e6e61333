"""benchmarks: compare data-loading strategies on the user's own data and hardware."""
