"""The one build pipeline under precompute.job: plan, shard work, write, output side, runners."""
