"""``python -m benchmarks.suite.objstore``: see the package docstring."""

from benchmarks.suite.objstore import main

main()
