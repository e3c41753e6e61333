"""``doctor``'s codec advice, for every kind: would a raw store be I/O-bound, and which codecs.

The storage's read speed is the doctor's own measurement (a store's shard files when given, else
the source's files, page cache dropped where possible). A few items of the user's source are
assembled as the build stores them (:func:`precompute.fields.assemble.assemble`: decoded,
checked, placed at the spec's size), and each field is encoded, in chunks of the spec's
``chunk_samples``, with each codec its kind takes (``Kind.codecs``, tried as :data:`TRIED`:
``jpeg:90`` for images, ``zstd:3`` for every kind) and decoded again, on one core: its bytes per
sample and decode speed are measured on the user's own data, never assumed.

With ``--store``, the store's own fields are named with their codecs as its metadata gives them
(``precompute inspect``'s) and its read bound is sized from its actual bytes per sample, beside
the raw store's. A raw store is I/O-bound when the storage delivers fewer raw samples per second
than the loader serves (the StoreLoader measured on the doctor's ``--store``, else the ``workers``
strategy's estimate, the feed a store replaces). Each field then gets the codec that stores it
smallest, if it gains at least :data:`GAIN`; a coded store reads ``raw / coded`` times more
samples per second, up to what decoding costs the reader threads (a JPEG field decodes on the
GPU where one is present with nvImageCodec, not on those threads).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "GAIN",
    "TRIED",
    "advice_for",
    "advice_lines",
    "codec_advice",
    "given_store",
    "measure_fields",
    "stored_values",
]

TRIED = {"jpeg": "jpeg:90", "zstd": "zstd:3"}  # each codec as the doctor tries it
GAIN = 1.5  # a codec is advised for a field it stores at least this many times smaller
SMALL = 1024  # bytes per sample under which a field stays raw (its chunks are too small to matter)
SAMPLES = 64  # items assembled for the measurement (at most)


def stored_values(plan: Any, count: int) -> tuple[dict[str, np.ndarray], int, list[str]]:
    """Up to ``count`` items of ``plan`` as the build stores them, by field.

    Returns:
        ``{field: (n, *shape) values}``, ``n``, and ``"KEY: reason"`` of each item that could
        not be read or decoded (left out).
    """
    from precompute.errors import DecodeError
    from precompute.fields.assemble import assemble

    spec, names = plan.spec, [f.name for f in plan.fields]
    rows: dict[str, list[np.ndarray]] = {n: [] for n in names}
    bad = []
    for item in plan.source.items[:count]:
        try:
            values, _ = assemble(item, plan.fields, plan.source.read_bytes, spec.size,
                                 spec.mode, spec.max_pixels)  # fmt: skip
        except DecodeError as exc:
            bad.append(f"{exc.key}: {exc.reason}")
            continue
        for n in names:
            rows[n].append(np.asarray(values[n]))
    n = len(rows[names[0]]) if names else 0
    return {k: np.stack(v) for k, v in rows.items() if v}, n, bad


def _try(codec: str, values: np.ndarray, chunk: int, fill: Any) -> dict[str, Any]:
    """``codec``'s bytes per sample of ``values`` in chunks of ``chunk``, and its decode speed."""
    from precompute.format.codecs import CodecSpec

    spec = CodecSpec.from_dict(codec)
    why = spec.codec.refuses(str(values.dtype), tuple(values.shape[1:]))
    if why:
        return {"codec": codec, "refused": why}
    parts = [np.ascontiguousarray(values[i : i + chunk]) for i in range(0, len(values), chunk)]
    stored = [spec.codec.encode(p, spec.options, fill) for p in parts]
    out: dict[str, Any] = {"codec": codec, "lossy": spec.lossy}
    out["bytes"] = (sum(map(len, stored)) + 4 * len(stored)) / len(values)  # + each crc32c
    try:
        spec.codec.ensure()
        t0 = time.perf_counter()
        for data, part in zip(stored, parts, strict=True):
            spec.codec.decode_into(data, np.empty_like(part), spec.options, fill)
        out["decode_per_s"] = len(values) / max(time.perf_counter() - t0, 1e-9)
    except ImportError as exc:
        out["decode_per_s"], out["decode_missing"] = None, str(exc)
    return out


def measure_fields(plan: Any, count: int = SAMPLES) -> dict[str, Any]:
    """Each field's raw bytes per sample and what each codec its kind takes makes of it."""
    from precompute.format.arrays import sample_nbytes

    size = plan.spec.size
    values, n, bad = stored_values(plan, count)
    fields = []
    for f in plan.fields:
        st = f.storage(size)
        raw = sample_nbytes(st.shape, np.dtype(st.dtype).itemsize)  # inspect's raw: decoded
        row: dict[str, Any] = {"field": f.name, "kind": f.kind, "raw_bytes": raw, "codecs": []}
        if raw < SMALL:
            row["small"] = True
        elif f.name in values:
            tried = [TRIED.get(c, c) for c in f.spec.codecs]
            chunk = int(plan.spec.chunk_samples)
            row["codecs"] = [_try(c, values[f.name], chunk, st.fill) for c in tried]
        fields.append(row)
    return {"samples": n, "left_out": bad, "chunk_samples": int(plan.spec.chunk_samples),
            "fields": fields}  # fmt: skip


def _choose(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The codec that stores the field smallest, if it gains at least :data:`GAIN`."""
    ok = [c for c in row["codecs"] if "bytes" in c and row["raw_bytes"] / c["bytes"] >= GAIN]
    return min(ok, key=lambda c: c["bytes"]) if ok else None


def codec_advice(
    measured: Mapping[str, Any],
    read_mb_s: float,
    serve_per_s: float,
    *,
    threads: int,
    device_jpeg: bool = False,
    raw_total: int | None = None,
) -> dict[str, Any]:
    """Whether a raw store is I/O-bound at ``read_mb_s``, and the per-field codec choice.

    Args:
        measured: :func:`measure_fields`' figures.
        read_mb_s: The storage's measured read speed.
        serve_per_s: Samples/s the loader serves when bytes are free.
        threads: Reader threads that decode on the CPU (at most the usable cores).
        device_jpeg: A CUDA device with nvImageCodec decodes the JPEG fields.
        raw_total: Raw bytes of one whole sample (default: the fields' sum).
    """
    fields = measured["fields"]
    raw = raw_total or sum(r["raw_bytes"] for r in fields)
    chosen = {r["field"]: c for r in fields if (c := _choose(r)) is not None}
    coded = raw - sum(r["raw_bytes"] - chosen[r["field"]]["bytes"] for r in fields
                      if r["field"] in chosen)  # fmt: skip
    per_core = [
        1.0 / c["decode_per_s"]
        for c in chosen.values()
        if c.get("decode_per_s") and not (device_jpeg and c["codec"].startswith("jpeg"))
    ]
    decode = threads / sum(per_core) if per_core else None
    raw_rate, coded_read = read_mb_s * 1e6 / raw, read_mb_s * 1e6 / coded
    coded_rate = min(x for x in (coded_read, decode, serve_per_s) if x is not None)
    return {
        "read_mb_per_s": read_mb_s,
        "serve_per_s": serve_per_s,
        "raw_bytes": raw,
        "raw_per_s": raw_rate,
        "io_bound": raw_rate < serve_per_s,
        "codecs": {k: c["codec"] for k, c in chosen.items()},
        "flag": ",".join(f"{k}={c['codec']}" for k, c in chosen.items()) or None,
        "coded_bytes": coded,
        "coded_read_per_s": coded_read,
        "decode_per_s": decode,
        "decode_threads": threads,
        "device_jpeg": device_jpeg,
        "coded_per_s": coded_rate,
    }


def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n:.0f} B"


def _field_line(row: Mapping[str, Any], choice: str | None) -> str:
    head = f"  {row['field']} ({row['kind']}, {_kib(row['raw_bytes'])} raw): "
    if row.get("small"):
        return head + "stays raw (too small a share of a sample to matter)"
    if not row["codecs"]:
        return head + "not measured (no sample of it could be read)"
    parts = []
    for c in row["codecs"]:
        if "refused" in c:
            parts.append(f"{c['codec']} refused ({c['refused']})")
            continue
        speed = c.get("decode_per_s")
        dec = (
            f"decodes {speed:.0f}/s/core"
            if speed
            else "decode not measured: " + str(c.get("decode_missing"))
        )
        ratio = row["raw_bytes"] / c["bytes"]
        parts.append(f"{c['codec']} {_kib(c['bytes'])} ({ratio:.1f}x smaller, {dec})")
    return head + "; ".join(parts) + (f" -> {row['field']}={choice}" if choice else " -> raw")


def _store_line(given: Mapping[str, Any], a: Mapping[str, Any]) -> list[str]:
    return [
        f"your store (--store): {given['text']}: {_kib(given['bytes'])}/sample: at most "
        f"{given['read_per_s']:.0f} samples/s from {a['read_mb_per_s']:.0f} MB/s"
    ]


def advice_lines(res: Mapping[str, Any]) -> list[str]:
    """The advice as the doctor prints it."""
    a, m = res["advice"], res["measured"]
    given = res.get("store")
    lines = [
        f"codecs on your data ({m['samples']} samples stored as the build would, chunks of "
        f"{m['chunk_samples']}; {len(m['left_out'])} left out, unreadable):",
        *(_field_line(r, a["codecs"].get(r["field"])) for r in m["fields"]),
        f"raw store: {_kib(a['raw_bytes'])}/sample: at most {a['raw_per_s']:.0f} samples/s from "
        f"{a['read_mb_per_s']:.0f} MB/s ({res['storage']}); the loader serves "
        f"{a['serve_per_s']:.0f}/s ({res['serve']})",
        *(_store_line(given, a) if given else []),
    ]
    if not a["io_bound"]:
        keep = "  raw is not I/O-bound here: keep the store raw (nothing to decode on the way)"
        if given and given["coded"]:
            keep = (
                "  raw is not I/O-bound here: a raw store reads as fast with nothing to decode "
                f"on the way (yours decodes {', '.join(given['coded'])})"
            )
        save = f"; --codec {a['flag']} would only save disk" if a["flag"] else ""
        return [*lines, keep + save]
    short = a["serve_per_s"] / a["raw_per_s"]
    if not a["flag"]:
        return [*lines, f"  raw is I/O-bound here ({short:.1f}x short), and no codec gains "
                        f"{GAIN}x on your data: faster storage is the way"]  # fmt: skip
    gpu = "; JPEG decoded on the GPU (nvImageCodec, not timed here)" if a["device_jpeg"] else ""
    dec = a["decode_per_s"]
    cpu = f"decode {dec:.0f}/s on {a['decode_threads']} reader threads" if dec else "no CPU decode"
    return [
        *lines,
        f"  raw is I/O-bound here ({short:.1f}x short): build with --codec {a['flag']}: "
        f"{_kib(a['coded_bytes'])}/sample, read {a['coded_read_per_s']:.0f}/s, {cpu}{gpu}: "
        f"up to {a['coded_per_s']:.0f} samples/s ({a['coded_per_s'] / a['raw_per_s']:.1f}x raw)",
    ]


def _nvimgcodec() -> bool:
    return importlib.util.find_spec("nvidia") is not None and (
        importlib.util.find_spec("nvidia.nvimgcodec") is not None
    )


def advice_for(
    res: Mapping[str, Any], plan: Any, raw_total: int, count: int = SAMPLES
) -> dict[str, Any]:
    """The advice from the doctor's figures ``res`` for the source ``plan``, measured here.

    Storage: the store's shard files when measured, else the source's. Serving: the measured
    StoreLoader when a store was given, else the ``workers`` strategy's estimate.
    ``raw_total``: the raw bytes of one stored sample (every field).
    """
    read = res.get("store_read") or res["read"]
    storage = "the store's files" if res.get("store_read") else "the source's files"
    if read.get("cache_dropped"):
        storage += ", page cache dropped first"
    loader = res.get("store_loader")
    if loader:
        serve, what = loader["samples_per_s"], "the StoreLoader measured on --store"
    else:
        serve = res["feed_rates"]["workers"]["samples_per_s"]
        what = "the workers strategy's estimate; give --store to measure the StoreLoader"
    measured = measure_fields(plan, min(count, len(plan)))
    gpu = bool(res["environment"]["gpu"].get("name")) and _nvimgcodec()
    threads = max(1, min(int(res["workers"]), int(res["environment"]["cores_usable"])))
    advice = codec_advice(measured, float(read["mb_per_s"]), float(serve), threads=threads,
                          device_jpeg=gpu, raw_total=raw_total)  # fmt: skip
    out = {"storage": storage, "serve": what, "measured": measured, "advice": advice}
    if res.get("store"):
        out["store"] = given_store(res["store"], float(read["mb_per_s"]))
    return out


def given_store(sample: Mapping[str, Any], read_mb_s: float) -> dict[str, Any]:
    """The ``--store`` as it is: each field's codec and its read bound at its actual bytes.

    ``sample``: :func:`benchmarks.harness.stored.store_sample` of the store.
    """
    nbytes = float(sample["bytes_per_sample"])
    codecs = {a["field"]: a["codec"] for a in sample["arrays"]}
    return {
        "codecs": codecs,
        "coded": {k: c for k, c in codecs.items() if c != "raw"},
        "text": sample["codecs"],
        "bytes": nbytes,
        "read_per_s": read_mb_s * 1e6 / max(nbytes, 1e-9),
    }
