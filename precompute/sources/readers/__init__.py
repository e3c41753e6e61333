"""Source readers for dataset formats: one module per format (Parquet, WebDataset).

COCO files, the boxes kind's own format, are read by :mod:`precompute.kinds.boxes.coco`.
"""
