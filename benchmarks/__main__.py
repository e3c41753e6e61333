"""``python -m benchmarks``: the ``bench`` command group (run, doctor)."""

from benchmarks.cli import main

if __name__ == "__main__":
    main()
