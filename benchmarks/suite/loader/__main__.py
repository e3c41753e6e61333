"""``python -m benchmarks.suite.loader [--only 123456]`` (:mod:`.bench`)."""

from benchmarks.suite.loader.bench import main

if __name__ == "__main__":
    main()
