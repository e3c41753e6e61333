"""Record the store pins (``tests/pins/pins.json``) with today's code; only on purpose.

``python -m tests.pins.record`` builds every pinned store on a local Ray and writes the pins.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from precompute.runtime.raylocal import start_local_ray
from tests.pins.stores import PINS, STORES, build_pin, copy_inputs, store_pin


def record(work: Path) -> dict[str, object]:
    """Build every pinned store under ``work``; return the pins by name."""
    inputs = copy_inputs(work / "src")
    pins: dict[str, object] = {}
    for name in STORES:
        root = build_pin(inputs, name, work / f"{name}.zarr")
        content = build_pin(inputs, name, work / f"{name}-content.zarr", "--content-hash")
        from precompute.format.layout import open_store_info

        pins[name] = store_pin(root, open_store_info(content).source_fingerprint)
    return pins


def main() -> None:
    """Write ``pins.json``."""
    local = start_local_ray(num_cpus=2)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pins = record(Path(tmp))
    finally:
        local.stop()
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS}: {len(pins)} stores")


if __name__ == "__main__":
    main()
