"""Run the loader contract suite against StoreLoader on the CPU."""

from __future__ import annotations

from typing import Any

from loaders import StoreLoader
from tests.contracts.loader_contract import LoaderContract


class TestStoreLoaderContract(LoaderContract):
    @staticmethod
    def make_loader(store_path: Any, **kw: Any) -> StoreLoader:
        return StoreLoader(store_path, device="cpu", **kw)


class TestStoreLoaderContractSmallWindows(LoaderContract):
    """Same suite with pread, one-chunk windows, no read threads and a prefetch depth of 1."""

    @staticmethod
    def make_loader(store_path: Any, **kw: Any) -> StoreLoader:
        return StoreLoader(
            store_path, device="cpu", buffer_chunks=1, num_threads=1, prefetch=1, io="pread", **kw
        )


class TestStoreLoaderContractInline(LoaderContract):
    """Same suite reading on the calling thread (prefetch=0), with a large shuffle window."""

    @staticmethod
    def make_loader(store_path: Any, **kw: Any) -> StoreLoader:
        return StoreLoader(store_path, device="cpu", prefetch=0, buffer_chunks=64, **kw)
