"""Diagnosis of a training loop's data loading: monitor, figures, evidence and advice.

A product feature, usable from training code without the benchmark harness (which imports it):

| module | what |
| --- | --- |
| ``monitor.py``, ``monitor_probes.py`` | CPU/RSS (psutil), GPU (pynvml), step timings |
| ``analysis.py`` | pure figures: data-wait share, CV, oscillation period, verdicts, break-even |
| ``loader_info.py`` | what the wrapped loader is and how it is set |
| ``frameworks.py`` | a ``tf.data`` pipeline's stages; what ``Diagnose.keras()`` gives Keras |
| ``evidence.py`` | step timings and the CPU of the loading work, per place it runs |
| ``advice.py``, ``advice_loaders.py`` | evidence -> what to change in this loader, and why |
| ``stalls.py`` | data-wait spikes every N steps: what in the loader has that period |
| ``diagnose.py``, ``report.py`` | the ``Diagnose`` wrapper and its ``Diagnosis`` |

``from loaders.diagnose import Diagnose`` and ``from loaders.monitor import Monitor`` stay the
stable import paths.
"""

from __future__ import annotations

from loaders.diagnostics.diagnose import Diagnose, Diagnosis
from loaders.diagnostics.monitor import Monitor, MonitorResult

__all__ = ["Diagnose", "Diagnosis", "Monitor", "MonitorResult"]
