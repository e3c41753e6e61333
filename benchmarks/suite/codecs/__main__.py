"""``python -m benchmarks.suite.codecs [--samples 2048] ...`` (:mod:`.bench`)."""

from benchmarks.suite.codecs.bench import main

if __name__ == "__main__":
    main()
