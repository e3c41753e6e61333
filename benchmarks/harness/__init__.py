"""The strategy comparison behind ``python -m benchmarks run|doctor``.

Strategies (:mod:`.strategies`, :mod:`.strategy_workers`, :mod:`.strategy_store`) and consumers
(:mod:`.consumers`) run one after another through the step loop (:mod:`.loop`); :mod:`.run`
drives a whole run (store build or check: :mod:`.prepare_store`) into the report
(:mod:`.report`, :mod:`.report_plots`); :mod:`.doctor` is the machine check and
:mod:`.sources` the harness's view of the raw dataset.
"""
