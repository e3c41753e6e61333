"""Ordering, batching and prefetch: which samples each batch holds, read ahead on a thread.

``order`` and ``plan`` are pure functions of (seed, epoch, rank, world); ``nodes``, ``reader``
and ``prefetch`` are the iterator nodes (next/reset/get_state) that turn a plan into host
batches. Importing this package pulls in no torch.
"""
