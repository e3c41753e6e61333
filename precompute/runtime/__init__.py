"""Where a build runs: its own local Ray or a running one, the watchdog, the cluster checks."""
