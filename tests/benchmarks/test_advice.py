"""Advice as a pure function of the evidence and the loader's settings (exact figures)."""

import pytest

from loaders.diagnostics.advice import advise, explain_stalls
from loaders.diagnostics.evidence import Evidence, stall_size
from loaders.diagnostics.loader_info import LoaderInfo, describe_loader


def ev(**kw):
    base = dict(
        steps=50,
        share=0.6,
        step_cv=0.05,
        median_step_s=0.1,
        wait_period_steps=None,
        stall_s=None,
        wait_busy=0.1,
        helper_cores=None,
        cores=2,
        has_gpu=False,
    )
    return Evidence(**{**base, **kw})


def dataloader(workers, **kw):
    settings = dict(
        num_workers=workers,
        persistent_workers=workers > 0,
        prefetch_factor=2 if workers else None,
        pin_memory=False,
        batch_size=8,
    )
    return LoaderInfo("dataloader", "DataLoader", {**settings, **kw})


def test_workers_that_fill_the_cores_lead_to_a_store_not_more_workers():
    out = advise(ev(helper_cores=1.9), dataloader(2))
    assert out[0].startswith("precompute a store")
    assert "2 worker(s) keep 1.9 of 2 cores busy (95% each)" in out[0]
    assert "more workers cannot help" in out[0]
    gpu = advise(ev(helper_cores=1.9, has_gpu=True), dataloader(2, pin_memory=True))
    assert any("decode on the GPU" in r for r in gpu)


def test_workers_waiting_on_io_at_the_cores_get_more_workers_than_cores():
    out = advise(ev(helper_cores=0.4), dataloader(2))
    assert out[0].startswith("raise num_workers from 2 to 4 and prefetch_factor from 2 to 4:")
    assert "they wait on I/O" in out[0]


def test_busy_machine_is_named_instead_of_a_settings_change():
    out = advise(ev(helper_cores=0.9, other_cpu_percent=60.0), dataloader(2))
    assert "other processes use about 60% of the machine" in out[0]
    assert "raise" not in out[0]


def test_only_changes_are_advised():
    multi = ev(helper_cores=0.5, passes=3, has_gpu=True)
    set_already = advise(multi, dataloader(1, persistent_workers=True, pin_memory=True))
    assert set_already[0].startswith("raise num_workers from 1 to 2:")
    assert "persistent_workers" not in " ".join(set_already)
    assert "pin_memory" not in " ".join(set_already)
    unset = advise(multi, dataloader(1, persistent_workers=False, pin_memory=False))
    assert unset[0].startswith(
        "raise num_workers from 1 to 2, persistent_workers=True, pin_memory=True:"
    )
    one_epoch = advise(ev(helper_cores=0.5), dataloader(1, persistent_workers=False))
    assert "persistent_workers" not in one_epoch[0]  # a single pass: nothing to keep alive


def test_one_core_decoding_in_the_main_process_leads_to_a_store():
    out = advise(ev(wait_busy=0.9, cores=1), dataloader(0))
    assert out[0].startswith("precompute a store") and "only core" in out[0]


def test_stall_explanations_follow_what_the_loader_has():
    assert "each worker delivers every 4th batch" in explain_stalls(4, dataloader(4))
    assert "in one of the 4 workers every 10 batches" in explain_stalls(10, dataloader(4))
    assert "on the training thread every 3 batches" in explain_stalls(3, dataloader(0))
    dali = LoaderInfo("dali", "JpegLoader", {"prefetch": 2, "num_threads": 2})
    assert "DALI pipeline's feed" in explain_stalls(5, dali)
    for text in (explain_stalls(3, dataloader(0)), explain_stalls(5, dali)):
        assert "worker" not in text


def test_worker_stalls_read_as_ordinals():
    assert "each worker delivers every 2nd batch" in explain_stalls(6, dataloader(2))
    assert "each worker delivers every 3rd batch" in explain_stalls(6, dataloader(3))


def test_spikes_once_a_pass_are_the_pass_not_the_workers_or_a_shard():
    """bench5: 'recur every 6 steps ... each worker delivers every 2th batch', 6 the epoch."""
    bench5 = ev(share=0.3, step_cv=0.73, wait_period_steps=6.0, stall_s=0.035,
                median_step_s=0.02, pass_steps=6.0, passes=3)  # fmt: skip
    out = " ".join(advise(bench5, dataloader(2)))
    assert "finish their batches together" not in out and "delivers" not in out
    assert "the spikes come once a pass (6 steps, the length of one pass" in out
    assert "each pass's first batches wait for the workers' queue to fill again" in out
    fresh = " ".join(advise(bench5, dataloader(2, persistent_workers=False)))
    assert "each pass starts the 2 worker processes again" in fresh
    assert "set persistent_workers=True so that the workers outlive each pass" in fresh
    store = LoaderInfo("storeloader", "StoreLoader", dict(prefetch=2, num_threads=2,
                       buffer_chunks=8, chunk_samples=32, batch_size=32, shards=4,
                       shard_samples=192))  # fmt: skip
    said = " ".join(advise(bench5, store))
    assert "once a pass" in said and "shard" not in said


def test_a_new_iterator_each_pass_gets_no_second_explanation_of_its_spikes():
    """The speech review: Keras epochs blamed on 'chunk reads ... (a slow shard file?)'."""
    keras = ev(share=0.5, step_cv=0.6, wait_period_steps=6.0, stall_s=0.05, median_step_s=0.02,
               pass_steps=6.0, passes=4, pass_start_s=0.05, pass_start_share=0.7)  # fmt: skip
    tf_store = LoaderInfo("loaders.tf", "loaders.tf.dataset", dict(prefetch=2, num_threads=2,
                          buffer_chunks=8, chunk_samples=32, batch_size=32, shards=1))  # fmt: skip
    out = advise(keras, tf_store)
    assert out[0].startswith("each pass over the dataset starts a new tf.data iterator")
    assert not any("stall" in r or "shard" in r for r in out), out


def test_a_store_period_is_blamed_on_a_shard_only_where_there_are_shards_of_that_period():
    def store(shards, shard_samples=64):
        return LoaderInfo("storeloader", "StoreLoader", dict(buffer_chunks=4, chunk_samples=16,
                          batch_size=8, shards=shards, shard_samples=shard_samples))  # fmt: skip

    assert "shard" not in explain_stalls(8, store(1, 256))  # one shard: never a slow shard
    assert "another of the store's 4 shard files every 12 batches" in explain_stalls(
        12, store(4, 96)
    )
    assert "reads one chunk every 2 batches" in explain_stalls(2, store(4, 96))
    other = explain_stalls(5, store(4, 96))
    assert "matches none of StoreLoader's reads" in other and "slow shard" not in other
    assert "a chunk: 2 batches, a shuffle window: 8, a shard file: 12" in other


def test_storeloader_stalls_at_its_shuffle_window(tiny_store):
    from loaders import StoreLoader

    with StoreLoader(tiny_store, 8, buffer_chunks=4) as loader:  # 4 chunks of 8 = 4 batches
        info = describe_loader(loader)
    assert info.kind == "storeloader" and info.settings["buffer_chunks"] == 4
    assert "reads a shuffle window of 4 chunks (4 batches) at a time" in explain_stalls(4, info)
    stalls = ev(share=0.15, step_cv=0.5, wait_period_steps=4.0, stall_s=0.3, median_step_s=0.1)
    out = advise(stalls, info)
    assert out[0].endswith("raise prefetch from 2 to 4: 4 batches ahead absorbs each stall")


def test_workers_in_lockstep_get_a_deeper_prefetch_factor():
    stalls = ev(share=0.1, step_cv=0.4, wait_period_steps=4.0, stall_s=0.25, median_step_s=0.1)
    out = advise(stalls, dataloader(4))
    assert "finish their batches together" in out[0]
    assert "raise prefetch_factor from 2 to 1" not in out[0]
    deep = advise(
        ev(share=0.1, step_cv=0.4, wait_period_steps=4.0, stall_s=1.0, median_step_s=0.1),
        dataloader(4),
    )
    assert "raise prefetch_factor from 2 to 3: 4 x 3 = 12 >= 11 batches ahead" in deep[0]
    assert "no data-loading change needed" not in " ".join(out + deep)


def store(**kw):
    settings = dict(prefetch=2, num_threads=2, augment=False, io="pread", remote=False)
    return LoaderInfo("storeloader", "StoreLoader", {**settings, **kw})


def test_storeloader_reader_threads_waiting_on_storage_get_more_threads():
    disk = ev(helper_cores=0.3, wait_busy=0.05, storage_bytes=64_000_000)
    out = advise(disk, store())
    assert out[0].startswith("raise num_threads from 2 to 4 and prefetch from 2 to 4:")
    assert "fetched 64 MB from storage meanwhile: they wait on storage" in out[0]
    remote = advise(ev(helper_cores=0.3, wait_busy=0.05, storage_bytes=0), store(remote=True))
    assert remote[0].startswith("raise num_threads from 2 to 4")  # over the network
    assert "read from object storage: they wait on storage" in remote[0]


def test_idle_readers_that_read_from_memory_are_never_told_more_threads():
    """The seg review: io="ram" (or the page cache) and idle readers asked for 2->4->8->16."""
    for info, cached in (
        (store(io="ram"), ev(helper_cores=0.3, wait_busy=0.05, storage_bytes=64_000_000)),
        (store(), ev(helper_cores=0.3, wait_busy=0.05, storage_bytes=20_000)),
        (store(), ev(helper_cores=0.3, wait_busy=0.05, storage_bytes=None)),
    ):
        said = " ".join(advise(cached, info))
        assert "raise num_threads" not in said and "they wait on storage" not in said, said
        assert "faster disk" not in said
        assert "do not wait on storage, so more threads cannot help" in said
    assert "(io='ram': every row was read once" in " ".join(
        advise(ev(helper_cores=0.3, wait_busy=0.05), store(io="ram"))
    )
    many = advise(ev(helper_cores=0.3, wait_busy=0.05, storage_bytes=0), store(num_threads=4))
    assert many[0].startswith("lower num_threads from 4 to 2:")  # never more than the cores
    busy = advise(ev(helper_cores=0.2, storage_bytes=0, other_cpu_percent=60.0), store())
    assert "other processes use about 60% of the machine" in busy[0]
    assert "raise" not in busy[0]


def test_readers_that_fill_the_cores_are_told_a_faster_disk_only_when_they_read_one():
    """The speech review: 28,540 samples/s from the page cache were told 'a faster disk'."""
    cached = advise(ev(helper_cores=1.9, storage_bytes=0), store())
    assert "faster disk" not in cached[0] and "stored size" not in cached[0]
    assert "reading is CPU work here" in cached[0] and "not a wait on storage" in cached[0]
    disk = advise(ev(helper_cores=1.9, storage_bytes=300_000_000), store())
    assert "the host cannot read faster; a smaller stored size or a faster disk" in disk[0]


def test_irregular_waits_and_compute_variation_are_told_apart():
    waits = advise(ev(share=0.1, step_cv=0.5, wait_varies=True), dataloader(2))
    assert "data waits vary irregularly" in waits[0]
    compute = advise(ev(share=0.1, step_cv=0.5), dataloader(2))
    assert "comes from the step itself" in compute[0]


def test_stall_size_and_too_few_steps():
    assert stall_size([0.0] * 9 + [0.5]) == pytest.approx(0.5)
    assert stall_size([0.1] * 10) is None
    assert advise(ev(share=None, steps=0), dataloader(0)) == [
        "not enough steps measured to judge; iterate for longer"
    ]


def test_a_store_behind_tf_or_jax_is_told_where_its_settings_are_given():
    settings = dict(prefetch=0, num_threads=2, buffer_chunks=8, chunk_samples=32, batch_size=8)
    for kind, call in (
        ("loaders.tf", "loaders.tf.dataset(...)"),
        ("loaders.jax", "loaders.jax.batches(...)"),
    ):
        out = advise(ev(), LoaderInfo(kind, kind, settings))
        assert out[0].startswith(f"set prefetch=2 in {call} (now 0):")
        assert not any("precompute a store" in r for r in out)
    plain = advise(ev(), LoaderInfo("storeloader", "StoreLoader", settings))
    assert plain[0].startswith("set prefetch=2 (now 0):")


def test_new_iterators_each_pass_are_advised_only_when_they_cost_the_wait():
    tf_store = LoaderInfo("loaders.tf", "loaders.tf.dataset", dict(prefetch=2, num_threads=2))
    costly = ev(share=0.6, passes=4, pass_start_s=0.05, pass_start_share=0.7)
    out = advise(costly, tf_store)
    assert out[0].startswith("each pass over the dataset starts a new tf.data iterator")
    assert "50 ms each, 70% of the data wait" in out[0]
    assert "epochs=E, state=state" in out[0]
    cheap = ev(share=0.6, passes=4, pass_start_s=0.001, pass_start_share=0.1)
    assert not any("new tf.data iterator" in r for r in advise(cheap, tf_store))
    tiny_wait = ev(share=0.05, passes=4, pass_start_s=0.01, pass_start_share=0.9)
    assert not any("new tf.data iterator" in r for r in advise(tiny_wait, tf_store))
    once = ev(share=0.6, passes=1, pass_start_s=None, pass_start_share=None)
    assert not any("new tf.data iterator" in r for r in advise(once, tf_store))
    other = LoaderInfo("tf.data", "tf.data", dict(tf_maps=1, tf_parallel_maps=1, tf_prefetch=True))
    assert any("ds.repeat()" in r for r in advise(costly, other))


def test_dali_decoding_without_a_gpu_at_the_cores_is_told_a_store_and_a_store_reader_not():
    jpeg = LoaderInfo("dali", "JpegLoader", dict(prefetch=2, num_threads=2, decodes=True))
    assert advise(ev(), jpeg)[0].startswith("precompute a store")
    assert advise(ev(has_gpu=True), jpeg)[0].startswith("raise prefetch from 2 to 4:")
    reader = LoaderInfo("dali", "DaliStoreLoader", dict(prefetch=2, num_threads=2, decodes=False))
    out = advise(ev(), reader)
    assert out[0].startswith("raise prefetch from 2 to 4:") and "decodes" not in out[0]
