"""Advice for the store loaders (StoreLoader, loaders.tf, loaders.jax), DALI and tf.data.

Pure functions of :class:`~loaders.diagnostics.evidence.Evidence` and
:class:`~loaders.diagnostics.loader_info.LoaderInfo`, worded as the change to make where the
user makes it (``set prefetch=2`` on a StoreLoader, ``set prefetch=2 in
loaders.tf.dataset(...)``). A store is never advised to a loader that reads one already, and
its readers are said to wait on storage (more threads, a faster disk) only when they read
from it: a store in object storage, or bytes the process fetched from a disk meanwhile; never
with ``io="ram"`` or a store the page cache holds, where more threads than cores only compete.
"""

from __future__ import annotations

from loaders.diagnostics.evidence import Evidence
from loaders.diagnostics.loader_info import TF_DATA, TF_STORE, LoaderInfo

__all__ = [
    "BUSY_CPU",
    "OTHERS_BUSY",
    "STORAGE_MIN",
    "STORE",
    "dali",
    "gain",
    "pass_starts",
    "reads_storage",
    "store_family",
    "tf_data",
]

BUSY_CPU = 0.5  # a loader thread/worker on CPU less than this share of its time waits on I/O
OTHERS_BUSY = 25.0  # % of the machine other processes use above which they explain slow helpers
STORAGE_MIN = 1 << 20  # bytes fetched from storage over the measured steps: below, none waited
STORE = "precompute a store (`precompute build SRC --out STORE`, then StoreLoader)"
PASS_START = 0.3  # share of the data wait the passes' starts take before they are advised on
PASS_START_STEP = 0.05  # ... and of the whole step time


def gain(ev: Evidence) -> str:
    """The measured wait and what removing it gains."""
    share = min(ev.share or 0.0, 0.99)
    return (
        f"data wait is {share:.0%} of step time (steps up to {1 / (1 - share):.1f}x faster "
        "without it)"
    )


def reads_storage(ev: Evidence, info: LoaderInfo) -> bool:
    """Whether the store loader's reads went to storage, not memory or the page cache.

    ``io="ram"`` never does after it opened; a store in object storage always does (over the
    network, which the kernel's disk count misses); else the bytes the process fetched from
    storage over the measured steps must reach :data:`STORAGE_MIN`.
    """
    if info.get("io") == "ram":
        return False
    if info.get("remote"):
        return True
    return ev.storage_bytes is not None and ev.storage_bytes >= STORAGE_MIN


def _source(ev: Evidence, info: LoaderInfo) -> str:
    """Where the readers' bytes came from, as measured."""
    if info.get("io") == "ram":
        return "read from memory (io='ram': every row was read once when the loader opened)"
    if info.get("remote"):
        return "read from object storage"
    if ev.storage_bytes is None:
        return "the bytes they fetched from storage could not be counted here"
    if ev.storage_bytes < STORAGE_MIN:
        return (
            f"fetched {ev.storage_bytes / 1e6:.1f} MB from storage meanwhile (the page cache "
            "served the rest)"
        )
    return f"fetched {ev.storage_bytes / 1e6:.0f} MB from storage meanwhile"


def store_family(ev: Evidence, info: LoaderInfo) -> list[str]:
    """A data-bound StoreLoader, directly or behind ``loaders.tf`` / ``loaders.jax``."""
    threads, prefetch = info.get("num_threads") or 1, info.get("prefetch")
    if prefetch == 0:
        return [
            f"set prefetch=2{info.where} (now 0): {gain(ev)}; StoreLoader reads every batch "
            "on the training thread, and a background thread would overlap the reads with "
            "the step"
        ]
    busy = ev.wait_busy
    if busy is not None and busy >= BUSY_CPU and info.get("augment"):
        where = (
            "on the CPU: give device='cuda' so it runs on the GPU"
            if ev.has_gpu and info.get("device") == "cpu"
            else "on the training thread: a smaller stored size leaves it fewer pixels"
        )
        return [
            f"{gain(ev)}; {busy:.0%} of it the training thread spends on CPU work, the "
            f"augmentation, which runs {where}"
        ]
    per = None if ev.helper_cores is None else ev.helper_cores / threads
    if per is not None and per < BUSY_CPU:
        return [_idle_readers(ev, info, threads, per)]
    if threads < ev.cores:
        return [
            f"raise num_threads from {threads} to {ev.cores}{info.where}: {gain(ev)}; the "
            "readers are busy and cores are left"
        ]
    if reads_storage(ev, info):
        return [
            f"{gain(ev)} with {threads} reader threads on {ev.cores} cores, which "
            f"{_source(ev, info)}: the host cannot read faster; a smaller stored size or a "
            "faster disk reads fewer bytes per sample"
        ]
    return [
        f"{gain(ev)} with {threads} reader threads busy on the {ev.cores} cores, which "
        f"{_source(ev, info)}: reading is CPU work here (copying chunks from memory), not a "
        "wait on storage, and the cores are its limit: no loader setting reads faster; a "
        "longer step per batch (more work per step) hides the wait"
    ]


def _idle_readers(ev: Evidence, info: LoaderInfo, threads: int, per: float) -> str:
    """Reader threads off the CPU most of the time: waiting on storage, or not waiting at all."""
    prefetch = info.get("prefetch") or 1
    idle = f"the reader threads are on the CPU {per:.0%} of the time and {_source(ev, info)}"
    if info.kind == TF_STORE and not info.get("ahead"):
        return (
            f"{gain(ev)}, and the StoreLoader's readers keep ahead (on the CPU {per:.0%} of "
            "the time): the wait is the hand-over of each batch to TensorFlow on the "
            "training thread, a cost per batch: a larger batch_size pays it for more samples "
            f"at once; with cores to spare, set ahead=2{info.where} to hand batches over on "
            "tf.data's thread beside the step (docs/frameworks.md)"
        )
    if reads_storage(ev, info):
        return (
            f"raise num_threads from {threads} to {2 * threads} and prefetch from {prefetch} "
            f"to {2 * prefetch}{info.where}: {gain(ev)}; {idle}: they wait on storage, and "
            "more parallel reads overlap the waits"
        )
    if (ev.other_cpu_percent or 0.0) > OTHERS_BUSY:
        return (
            f"{gain(ev)}; {idle}, so they do not wait on storage: other processes use about "
            f"{ev.other_cpu_percent:.0f}% of the machine and the loader gets less CPU than the "
            "cores suggest; measure on an idle machine before changing settings"
        )
    if threads > ev.cores:
        return (
            f"lower num_threads from {threads} to {ev.cores}{info.where}: {gain(ev)}; {idle}: "
            f"they do not wait on storage, and threads beyond the {ev.cores} cores only "
            "compete with the training thread for them"
        )
    return (
        f"{gain(ev)}; {idle}: they keep ahead and do not wait on storage, so more threads "
        "cannot help: the wait is on the training thread, each batch's hand-over (and its "
        "augmentation on the CPU, if any), a cost per batch: a larger batch_size pays it for "
        "more samples at once"
    )


def dali(ev: Evidence, info: LoaderInfo) -> list[str]:
    """A data-bound DALI loader: its threads, its queue, or (decoding on the CPU) a store."""
    threads, prefetch = info.get("num_threads") or 1, info.get("prefetch") or 1
    if threads < ev.cores:
        return [
            f"raise num_threads from {threads} to {ev.cores}: {gain(ev)}; DALI's CPU "
            "stage has cores left"
        ]
    if info.get("decodes") and not ev.has_gpu:
        return [
            f"{STORE} (or DaliStoreLoader over it): {gain(ev)}; without a GPU {info.name} "
            f"decodes every file on its {threads} CPU threads, which fill the {ev.cores} cores, "
            "every epoch"
        ]
    return [
        f"raise prefetch from {prefetch} to {2 * prefetch}: {gain(ev)}; the pipeline's "
        "threads already match the cores"
    ]


def tf_data(ev: Evidence, info: LoaderInfo) -> list[str]:
    """A data-bound ``tf.data`` pipeline of the user's (decoding on TensorFlow's threads)."""
    serial = int(info.get("tf_maps") or 0) - int(info.get("tf_parallel_maps") or 0)
    out = []
    if serial > 0:
        out.append(
            f"give its {serial} map stage(s) num_parallel_calls=tf.data.AUTOTUNE: {gain(ev)}; "
            "a map without it runs one element at a time"
        )
    if not info.get("tf_prefetch"):
        out.append(
            f"end the pipeline with .prefetch(tf.data.AUTOTUNE){'' if out else f': {gain(ev)}'}"
            "; without it the step waits while the next batch is made"
        )
    tail = "" if out else f": {gain(ev)}, with the maps parallel and a prefetch already"
    out.append(
        f"{STORE.replace('then StoreLoader', 'then loaders.tf.dataset')}{tail}, so epochs "
        "read decoded samples instead of decoding on TensorFlow's threads"
    )
    return out


def pass_starts(ev: Evidence, info: LoaderInfo) -> str | None:
    """Each pass costs a new iterator (tf.data in Keras ``fit``): one iterator for every epoch."""
    if info.kind not in (TF_STORE, TF_DATA) or ev.passes < 2 or not ev.pass_start_share:
        return None
    if ev.pass_start_share < PASS_START or not ev.pass_start_s:
        return None
    if ev.pass_start_share * (ev.share or 0.0) < PASS_START_STEP:  # too little of the step
        return None
    cost = f"{ev.pass_start_s * 1e3:.0f} ms each, {ev.pass_start_share:.0%} of the data wait"
    head = (
        f"each pass over the dataset starts a new tf.data iterator (Keras fit makes one every "
        f"epoch): {cost}"
    )
    if info.kind == TF_STORE:
        return (
            f"{head}; serve every epoch from one iterator: loaders.tf.dataset(..., epochs=E, "
            "state=state) and model.fit(ds, epochs=E, steps_per_epoch=len(state.loader))"
        )
    return (
        f"{head}; serve every epoch from one iterator: ds.repeat() and model.fit(ds, "
        "epochs=E, steps_per_epoch=STEPS)"
    )
