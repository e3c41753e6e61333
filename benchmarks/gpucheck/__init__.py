"""The GPU check: one command that exercises every CUDA path in the first minutes a GPU is lent.

``bash scripts/gpu-check.sh prepare`` (here) downloads the wheels the GPU machine lacks and
writes a raw JPEG dataset into ``.gpucheck/``; ``bash scripts/gpu-check.sh run`` (there) builds
a store with the in-process runner (no Ray), runs the ``gpu`` tests that need neither Ray nor
DALI, measures the feeds (StoreLoader + TrainAugment in float32 and bfloat16 channels-last
with mixup, a classic DataLoader with Pillow workers, nvJPEG decode + the same augmentation)
alone and under a real training step, the decode row (a ``jpeg:90`` store decoded on the device
by nvImageCodec, on the CPU reader threads, and the raw store beside), and writes
``report.md``, ``report.json`` and plots.
``run --cpu`` runs the same steps here with the CUDA ones skipped, so the kit cannot rot.
See ``docs/gpu.md``.

| module | what |
| --- | --- |
| ``data.py`` | the raw dataset: photo-like JPEGs in class folders |
| ``gputests.py``, ``plugin.py`` | find and run the ``gpu`` tests; say which cannot run and why |
| ``feeds.py`` | the strategies the check adds to :mod:`benchmarks.harness.strategies` |
| ``decode.py`` | the decode row: the JPEG store and its feeds (device, CPU, raw) |
| ``wheels.py`` | nvImageCodec's wheel cut down to one Python and the JPEG decoders |
| ``consumers.py`` | the training step each feed drives (ResNet-50 bf16, or the small net) |
| ``check.py`` | the whole run, within its time budget |
| ``report.py`` | ``report.md`` / ``report.json`` / plots (:mod:`benchmarks.harness.report`) |
"""
