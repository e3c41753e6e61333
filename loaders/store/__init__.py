"""Store reading: open and validate a store, read whole inner chunks of its shards, check them.

``open_store`` checks a store before the first batch; ``shardio`` reads chunks (``preadv`` or
``mmap``) using the shard index, ``chunkcheck`` verifies their crc32c, ``rows`` routes rows to
their batch rows. Importing this package pulls in neither torch nor zarr.
"""
