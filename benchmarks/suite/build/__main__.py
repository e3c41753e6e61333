"""``python -m benchmarks.suite.build [--images N] ...`` (:mod:`.bench`)."""

from benchmarks.suite.build.bench import main

if __name__ == "__main__":
    main()
