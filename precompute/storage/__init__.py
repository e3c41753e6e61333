"""Object storage (s3://): reads, writes, uploads, and the read-only stores zarr and fsspec use."""
