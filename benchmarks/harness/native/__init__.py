"""Raw-file pipelines of other engines, per kind of data: ``tf.data`` and DALI graphs.

The workloads (:mod:`benchmarks.harness.workloads`) open them for the ``tf-native`` and
``gpu-decode`` strategies; each module imports its engine when a strategy opens it.

| module | what |
| --- | --- |
| ``files.py`` | which files an engine's decoders take (by their headers), the rest named |
| ``tf_images.py`` | ``tf.io.decode_image`` + random resized crop + flip + normalise |
| ``tf_audio.py`` | ``tf.audio.decode_wav``, resampling, ``tf.signal.stft``, a mel matrix, masks |
| ``dali_audio.py`` | ``fn.decoders.audio``, ``fn.spectrogram``, mel filter bank, decibels |
| ``dali_epochs.py`` | a DALI graph per epoch, fed from Python, as an epoch source |
| ``dali_masks.py`` | ``fn.decoders.image`` of image and mask, one crop + flip for both |
"""
