"""The strategy comparison behind ``python -m benchmarks run|doctor``, for every kind of data.

The source is listed as ``precompute build`` lists it (:mod:`.sources`); the kinds of its
fields choose the workload (:mod:`.workloads`: what every strategy serves per sample, the
model, the raw-file pipelines); strategies (:mod:`.strategies`, with the other engines'
pipelines in :mod:`.native`) and consumers (:mod:`.consumers`) run one after another through
the step loop (:mod:`.loop`); :mod:`.run` drives a whole run (store build or check:
:mod:`.prepare_store`) into the report (:mod:`.report`, :mod:`.report_tables`,
:mod:`.report_plots`); :mod:`.doctor` is the machine check.
"""
