"""Array (spectral) policies: ``BandNormalize`` (policy), band crops, buffers and rotate-90."""
