"""Host batch buffers and the copy to the device (pinned memory and a side stream on CUDA)."""
