"""The harness's view of a dataset: class counts of folders and integer-label manifests."""

from pathlib import Path

from benchmarks.harness.sources import num_classes
from precompute.sample import make_sample_dataset


def test_num_classes_of_folders_and_integer_manifests(tmp_path: Path) -> None:
    root = make_sample_dataset(tmp_path / "img", num_images=4, num_classes=2, size_range=(16, 24))
    files = sorted(p for p in root.rglob("*") if p.suffix in (".jpg", ".png"))
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"path,label\n{files[0]},0\n{files[1]},6\n")  # integer labels: 7 classes
    assert num_classes(str(root)) == 2
    assert num_classes(str(manifest)) == 7
