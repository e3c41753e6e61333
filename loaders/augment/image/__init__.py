"""Image policies: ``TrainAugment``/``EvalAugment`` (pipeline), ops, colour, resampling."""
