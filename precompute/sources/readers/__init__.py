"""Source readers for dataset formats: one module per format (COCO, Parquet, WebDataset)."""
