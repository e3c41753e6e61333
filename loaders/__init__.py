"""loaders: stream a nostall store to the device, with on-device augmentation."""
