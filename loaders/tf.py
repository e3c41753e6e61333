"""loaders.tf: a nostall store as a ``tf.data.Dataset``, ready for Keras ``model.fit``.

A :class:`~loaders.torch_loader.StoreLoader` serves the batches, so the order, augmentation,
mixup, ranks and exact resume are the loader's, and its reading runs ahead on its own thread
(``prefetch``); this module hands each batch to TensorFlow without a copy (NumPy views of the
loader's tensors, which tf.data's generator wraps in place: TF's tensor shares the loader's
buffer, which the loader reuses only once TF dropped it; :func:`to_tf` does the same by
DLPack). The dataset yields host tensors (tf.data runs on the host): a batch made on CUDA
(``device="cuda"``) is copied to host memory first, and a non-contiguous tensor is made
contiguous (TF takes row-major data only). Importing this module imports TensorFlow (``pip
install 'nostall[tf]'``); ``import loaders`` does not.

Each iteration of the dataset is a new tf.data iterator, which costs tens of milliseconds to
start (its functions are instantiated): a loop that iterates once per epoch (Keras ``fit``
without ``steps_per_epoch``) pays it each epoch. ``epochs=E`` with one iterator for the whole
run (Keras ``fit(ds, epochs=E, steps_per_epoch=len(state.loader))``) pays it once. tf.data's
autotuning is off (:func:`_options`): its thread now and then held an iterator's end 20-30 ms.

Each batch is handed over as the consumer asks; with ``ahead=N`` tf.data hands them over ahead
of the consumer, on its own thread (a prefetch buffer; see :func:`_quiesce` for the exit). The
resume state is exact either way: it is the loader's ``state_dict`` after the last batch the
*consumer* took (:class:`Served`). Add no ``.prefetch()`` (nor a ``map`` with
``num_parallel_calls``) after the dataset if you checkpoint mid-epoch: the state would count
what ran ahead, not what the model trained on; a plain ``map`` runs as the consumer asks
(tf.data's automatic map parallelization is switched off).
"""

from __future__ import annotations

import atexit
import json
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np
import torch

from loaders.contract import check_int
from loaders.errors import LoaderError
from loaders.frameworks import check_epochs, epoch_batches, require
from loaders.torch_loader import StoreLoader

tf = require("tensorflow", "tf")

__all__ = ["Element", "LoaderState", "Served", "dataset", "to_host", "to_tf"]

Value = torch.Tensor | list[str]


def to_tf(value: Value) -> Any:
    """Return a batch entry as a host ``tf.Tensor``: DLPack, no copy for a contiguous CPU tensor.

    A list of strings (``key``) becomes a ``tf.string`` tensor.
    """
    if isinstance(value, list):
        return tf.constant(value, dtype=tf.string, shape=(len(value),))
    if value.device.type != "cpu":  # tf.data yields host tensors
        value = value.cpu()
    if not value.is_contiguous():  # TF's DLPack import takes compact row-major data only
        value = value.contiguous()
    return tf.experimental.dlpack.from_dlpack(value.__dlpack__())


def to_host(value: Value) -> np.ndarray:
    """Return a batch entry as a NumPy array for tf.data's generator: a view, no copy.

    A CPU tensor becomes a view of its buffer (``bfloat16`` viewed through ``int16`` as
    ``ml_dtypes.bfloat16``, TF's NumPy type); TF then wraps the view without a copy (tf.data's
    ``py_func`` aliases an aligned, contiguous array, and copies any other), and the view holds
    the loader's buffer until TF drops it. A CUDA tensor is copied to host memory; a list of
    strings (``key``) becomes an object array, a ``tf.string`` tensor.
    """
    if isinstance(value, list):
        return np.array(value, dtype=object)
    if value.device.type != "cpu":  # tf.data yields host tensors
        value = value.cpu()
    if value.dtype == torch.bfloat16:  # no NumPy bfloat16 in torch: the same bits, TF's type
        return value.view(torch.int16).numpy().view(tf.bfloat16.as_numpy_dtype)
    return value.numpy()


@dataclass(frozen=True)
class Element:
    """How a batch dict becomes a dataset element.

    Attributes:
        inputs: None: the dict itself (every key). A key: that entry alone as the model input;
            several keys: a dict of them (a Keras model with named inputs).
        target: None: no target (with ``inputs``: the input alone, for ``predict``). A key:
            ``(x, y)``, Keras ``fit``'s pair, and ``(x, y, sample_weight)`` when
            :attr:`weighted`.
        weights: Weights 0 on the ``is_pad`` repeats (``drop_last=False`` over several ranks:
            ``evaluate`` counts every sample once).
        class_weight: Each class's weight, by class index (a class past the end weighs 1),
            times the repeats' weights: Keras's ``class_weight``, given to the dataset.
    """

    inputs: str | tuple[str, ...] | None
    target: str | None
    weights: bool
    class_weight: tuple[float, ...] | None = None

    @property
    def weighted(self) -> bool:
        """Whether an element with a target carries sample weights."""
        return self.weights or self.class_weight is not None

    def weigh(self, y: np.ndarray, is_pad: np.ndarray) -> np.ndarray:
        """The sample weights of a batch of targets ``y``: float32 ``[B]``.

        Class indices as Keras takes them from ``y``: the index itself, or the largest entry
        of a row of soft targets (mixup).
        """
        w = (~is_pad).astype(np.float32) if self.weights else np.ones(len(y), np.float32)
        if self.class_weight is None:
            return w
        table = np.asarray(self.class_weight, np.float32)
        rows = np.asarray(y, np.float32).reshape(len(y), -1)
        classes = rows.argmax(1) if rows.shape[1] > 1 else np.rint(rows[:, 0]).astype(np.int64)
        inside = (classes >= 0) & (classes < len(table))
        return w * np.where(inside, table[np.clip(classes, 0, len(table) - 1)], np.float32(1))

    def check(self, keys: Sequence[str]) -> None:
        """Refuse keys a batch lacks, or a target without inputs.

        Raises:
            ValueError: Naming the key and the batch's keys.
        """
        if self.target is not None and self.inputs is None:
            raise ValueError(f"target={self.target!r} needs inputs= too (the batch's keys: {keys})")
        names = [self.inputs] if isinstance(self.inputs, str) else list(self.inputs or ())
        for name in [*names, *([self.target] if self.target else [])]:
            if name not in keys:
                raise ValueError(f"the batches have no {name!r}: their keys are {list(keys)}")

    def needs(self, keys: Sequence[str]) -> list[str]:
        """The keys of a batch (of ``keys``) its element holds: the others are not converted."""
        if self.inputs is None:
            return list(keys)
        names = [self.inputs] if isinstance(self.inputs, str) else list(self.inputs)
        return names + ([self.target] if self.target is not None else [])

    def build(self, values: Mapping[str, Any], weight: Callable[[], Any]) -> Any:
        """Return the element of ``values`` (converted entries); ``weight()`` makes the weights."""
        if self.inputs is None:
            return dict(values)
        x = (
            values[self.inputs]
            if isinstance(self.inputs, str)
            else {k: values[k] for k in self.inputs}
        )
        if self.target is None:
            return x
        y = values[self.target]
        return (x, y, weight()) if self.weighted else (x, y)


class Served:
    """Which batch the consumer took last, and the loader's state after it.

    The generator numbers each element it yields (a serial) and keeps the loader's state after
    that batch; the dataset's last step (:func:`_pipeline`) stores the serial of each element
    in a ``tf.Variable`` as the consumer takes it, after tf.data's prefetch buffer. The state of
    the batches the consumer took is then exact however far tf.data converted ahead.

    Args:
        loader: The loader behind the dataset.
        ahead: Elements tf.data holds ahead of the consumer (the prefetch buffer).
    """

    def __init__(self, loader: StoreLoader, ahead: int) -> None:
        self.loader, self.ahead = loader, ahead
        self.keep = 2 * (ahead + 2)  # the buffer, the step, in hand
        self.taken = tf.Variable(-1, dtype=tf.int64, trainable=False)  # the serial consumed
        self._states: dict[int, dict[str, Any]] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._before: dict[str, Any] | None = None  # the state before the batch in the making
        self._calls = threading.Condition(self._lock)
        self._busy = False  # a batch is being made (on tf.data's thread, with ``ahead``)
        self._running = 0  # generators begun and not finished (returned, raised or dropped)

    def running(self, change: int) -> None:
        """Count a generator that begins (+1) or finishes (-1)."""
        with self._calls:
            self._running += change
            self._calls.notify_all()

    def making(self, busy: bool) -> None:
        """Note that the generator starts (True) or stops (False) making a batch."""
        with self._calls:
            self._busy = busy
            self._calls.notify_all()

    def wait_quiet(self, deadline: float) -> bool:
        """Wait until tf.data's thread runs no Python of this dataset and will start none.

        That is: no batch is being made, and every generator finished or the batches made and
        not consumed fill the buffer (``ahead``). False at ``deadline`` (``time.monotonic``).
        """
        with self._calls:
            while self._busy or not (
                self._running == 0 or self._next - 1 - int(self.taken.numpy()) >= self.ahead
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._calls.wait(min(left, 0.05))  # a batch consumed does not notify: poll
        return True

    def begin(self) -> None:
        """Note the loader's state before the generator asks it for a batch.

        While that batch is made the loader's own state is already past it; :meth:`state_dict`
        uses this one until :meth:`add` records the batch.
        """
        with self._lock:
            self._before = self.loader.state_dict()

    def end(self) -> None:
        """The generator asks for no batch (its iteration is over)."""
        with self._lock:
            self._before = None

    def add(self, state: dict[str, Any]) -> int:
        """Record the loader's ``state`` after a batch; return the batch's serial."""
        with self._lock:
            self._before = None
            serial, self._next = self._next, self._next + 1
            self._states[serial] = state
            if len(self._states) > self.keep:  # forget the batches before the one consumed
                taken = int(self.taken.numpy())
                for old in [k for k in self._states if k < taken]:
                    del self._states[old]
        return serial

    def state_dict(self) -> dict[str, Any]:
        """The loader's state after the last batch consumed.

        The loader's own state when it changed since its last batch (``load_state_dict``,
        ``set_epoch``) or before any batch was consumed. An iteration given up with batches
        still in the buffer leaves the state of the last batch consumed, as
        :class:`StoreLoader` leaves the state of its last batch when an iteration is broken
        off.
        """
        with self._lock:  # the generator cannot begin or add a batch meanwhile
            live = self._before if self._before is not None else self.loader.state_dict()
            last = self._states.get(self._next - 1)
            taken = self._states.get(int(self.taken.numpy()))
        return taken if taken is not None and live == last else live


_PythonState: Any = tf.train.experimental.PythonState  # TF ships no types


class LoaderState(_PythonState):  # type: ignore[misc]
    """The resume state of a dataset made by :func:`dataset` (``state=``), for checkpoints.

    A ``tf.train.experimental.PythonState``: put it in a ``tf.train.Checkpoint`` next to the
    model (``tf.train.Checkpoint(model=model, data=state)``) and ``save``/``restore`` carry the
    loader's state after the last batch the consumer took; or keep :meth:`state_dict` (a
    JSON-able dict) with a Keras checkpoint. Restored before its dataset exists, the state waits
    and resumes the dataset made with it. :attr:`loader` is the dataset's
    :class:`StoreLoader` (``len``, ``epoch``, ``set_epoch``, ``close``).
    """

    def __init__(self) -> None:
        self._served: Served | None = None
        self._pending: dict[str, Any] | None = None

    @property
    def loader(self) -> StoreLoader | None:
        """The loader of the dataset this state belongs to (None before one is made)."""
        return None if self._served is None else self._served.loader

    def bind(self, served: Served) -> None:
        """Attach a dataset's :class:`Served` and resume its loader at a state restored before.

        Raises:
            LoaderError: The state belongs to another dataset already.
        """
        if self._served is not None:
            raise LoaderError("this LoaderState belongs to another dataset: make one per dataset")
        self._served = served
        if self._pending is not None:
            served.loader.load_state_dict(self._pending)
            self._pending = None

    def state_dict(self) -> dict[str, Any]:
        """The loader's state after the last batch the consumer took (see :class:`Served`).

        Raises:
            LoaderError: No dataset uses this state yet, and none was restored into it.
        """
        if self._served is not None:
            return self._served.state_dict()
        if self._pending is None:
            raise LoaderError("no dataset uses this LoaderState: pass it to dataset(state=...)")
        return dict(self._pending)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume the dataset's loader at ``state`` on its next iteration (or once bound)."""
        if self._served is None:
            self._pending = dict(state)
        else:
            self._served.loader.load_state_dict(state)

    def serialize(self) -> str:
        """The state as JSON (``tf.train.Checkpoint.save`` calls it)."""
        return json.dumps(self.state_dict())

    def deserialize(self, string_value: Any) -> None:
        """Load a state :meth:`serialize` wrote (``tf.train.Checkpoint.restore`` calls it)."""
        text = string_value.decode() if isinstance(string_value, bytes) else str(string_value)
        self.load_state_dict(json.loads(text))


def dataset(
    store: Any,
    batch_size: int,
    *,
    inputs: str | Sequence[str] | None = None,
    target: str | None = None,
    epochs: int | None = None,
    state: LoaderState | None = None,
    ahead: int = 0,
    class_weight: Mapping[int, float] | None = None,
    **options: Any,
) -> Any:
    """Return a ``tf.data.Dataset`` of a store's batches (a :class:`StoreLoader`'s).

    Args:
        store: What :class:`StoreLoader` opens: a path, an ``s3://`` URL, a cache reference.
        batch_size: Samples per batch (per rank).
        inputs: None: each element is the batch dict (``image``, ``label``, ``index``,
            ``is_pad``, ...: StoreLoader's keys; ``key`` a ``tf.string`` tensor). A key, or
            several: the model input (see :class:`Element`).
        target: With ``inputs``, a key: elements are ``(x, y)`` for Keras ``fit`` (which
            then takes its own ``class_weight``), ``(x, y, sample_weight)`` with
            ``drop_last=False`` over several ranks (weights 0 on the ``is_pad`` repeats) or
            with ``class_weight``.
        epochs: None: each iteration of the dataset serves the loader's next epoch (Keras
            ``fit(ds, epochs=E)`` iterates once per epoch). An integer: one iteration serves
            every epoch until the loader's epoch reaches it (:func:`~loaders.frameworks.
            epoch_batches`).
        state: A :class:`LoaderState` to checkpoint and resume the dataset with.
        ahead: Batches tf.data hands over ahead of the consumer, on its own thread (a
            prefetch buffer). 0 (the default): each batch is handed over when the consumer
            asks; the loader still reads ahead on its own thread (``prefetch``), and on two
            cores this was as fast or faster (``docs/frameworks.md``). The state counts the
            batches the consumer took, whatever ``ahead``. With ``ahead``, tf.data's thread
            runs this module's Python: see :func:`_quiesce` for the exit.
        class_weight: With ``target``: ``{class index: weight}`` (a class not named weighs
            1), Keras's ``class_weight`` folded into the elements' sample weights, with the
            repeats' zeros: ``fit`` refuses its own ``class_weight`` beside sample weights.
        **options: Every other keyword of :class:`StoreLoader`: ``shuffle``, ``seed``,
            ``drop_last``, ``augment``, ``mixup``, ``rank``, ``world_size``, ``device``,
            ``prefetch``, ``io``, ``keys``, ``dtype`` (``"float32"``: images and audio as
            floats, not as stored: :mod:`loaders.transfer.dtype`), ...

    Returns:
        A ``tf.data.Dataset``; its element spec comes from the first batch of the loader's
        current epoch, read once here (the batch dimension left ``None``).

    Raises:
        ValueError: A setting is out of range, ``inputs``/``target`` name a key the batches
            lack, ``class_weight`` is not a mapping of class indices to weights >= 0 (or has
            no ``target``), or the store serves no batch at this batch size.
        LoaderError: ``state`` is bound to another dataset, or a restored state does not match
            the loader (:meth:`~loaders.contract.ContractLoader.load_state_dict`).
    """
    epochs = check_epochs(epochs)
    ahead = check_int("ahead", ahead, 0)
    picked = tuple(inputs) if inputs is not None and not isinstance(inputs, str) else inputs
    table = _class_table(class_weight, target)
    loader = StoreLoader(store, batch_size, **options)
    try:
        pads = target is not None and not loader.drop_last and loader.world_size > 1
        element = Element(picked, target, weights=pads, class_weight=table)
        signature = _signature(loader, element)
        served = Served(loader, ahead)
        if state is not None:
            state.bind(served)
    except BaseException:
        loader.close()
        raise

    def generate() -> Iterator[Any]:
        served.running(+1)
        try:
            batches = epoch_batches(loader, epochs)
            while True:
                served.making(True)
                try:
                    if _EXITING.is_set():  # the interpreter exits: end the iteration
                        served.end()
                        return
                    served.begin()
                    try:
                        batch = next(batches)
                    except StopIteration:
                        served.end()
                        return
                    except Exception:
                        if _EXITING.is_set():  # the loader's read pool stopped at exit
                            served.end()
                            return
                        raise
                    serial = served.add(loader.state_dict())
                    item = np.int64(serial), _element(batch, element)
                finally:
                    served.making(False)
                yield item
        finally:  # returned, raised, or closed where it waited (tf.data dropped it)
            served.running(-1)

    if ahead:
        _PREFETCHED.add(served)
    out = _pipeline(generate, signature, served, ahead)
    out.nostall = {"loader": loader, "epochs": epochs, "ahead": ahead}  # for loaders.diagnostics
    return out


_PREFETCHED: weakref.WeakSet[Served] = weakref.WeakSet()  # datasets made with ahead > 0
_EXITING = threading.Event()
_EXIT_WAIT_S, _EXIT_GRACE_S = 10.0, 0.05


def _quiesce() -> None:
    """At exit, leave tf.data's prefetch threads out of this module's Python (``ahead`` > 0).

    tf.data's prefetch thread calls the dataset's generator (Python) ahead of the consumer. A
    call that runs, or begins, once the interpreter finalizes waits for the GIL forever, and
    TensorFlow's teardown waits for that thread: a script that left an iterator mid-epoch (a
    ``break``) never exited (tensorflow/tensorflow#22632). Each generator now ends at its next
    call; this waits, at most :data:`_EXIT_WAIT_S` seconds, until each finished or its buffer
    is full, then :data:`_EXIT_GRACE_S` for the end of tf.data's own Python around the call,
    which nothing here can observe: best effort. The default ``ahead=0`` runs the generator
    only on the consumer's thread and needs none of this.

    An ``atexit`` hook: it runs once the non-daemon threads have ended (a training thread
    still consuming is never cut short), after ``concurrent.futures`` stopped its pools: a
    batch being made then fails to read, and its generator ends quietly instead.
    """
    _EXITING.set()
    if not _PREFETCHED:
        return
    deadline = time.monotonic() + _EXIT_WAIT_S
    for served in list(_PREFETCHED):
        served.wait_quiet(deadline)
    time.sleep(_EXIT_GRACE_S)


atexit.register(_quiesce)  # after TensorFlow's import: before TensorFlow's own exit hooks


def _pipeline(
    generate: Callable[[], Iterator[Any]], signature: Any, served: Served, ahead: int
) -> Any:
    """``(serial, element)`` pairs -> prefetch -> each serial stored as the consumer takes it."""
    spec = (tf.TensorSpec((), tf.int64), signature)
    ds = tf.data.Dataset.from_generator(generate, output_signature=spec)
    if ahead:
        ds = ds.prefetch(ahead)

    def taken(serial: Any, element: Any) -> Any:
        with tf.control_dependencies([served.taken.assign(serial)]):
            return tf.nest.map_structure(tf.identity, element)

    return ds.map(taken).with_options(_options())


def _options() -> Any:
    """tf.data options: nothing after the step that marks consumption runs ahead of it.

    tf.data puts a prefetch after a pipeline that ends in a synchronous step, and runs a
    stateless ``map`` in parallel: either would run the step that stores each element's serial
    ahead of the consumer (a ``map`` after the dataset too: these options carry over to it).
    Autotuning is off: the dataset's buffer is ``ahead``, fixed, and the autotuning thread
    now and then held an iterator's destruction 20-30 ms (a new iterator each epoch).
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    options.experimental_optimization.map_parallelization = False
    return options


def _class_table(
    class_weight: Mapping[int, float] | None, target: str | None
) -> tuple[float, ...] | None:
    """Keras's ``class_weight`` as a table by class index (None: none).

    Raises:
        ValueError: Not a non-empty mapping of class indices to finite weights >= 0, or no
            ``target`` to weigh.
    """
    if class_weight is None:
        return None
    if target is None or not isinstance(class_weight, Mapping) or not class_weight:
        raise ValueError(
            "class_weight must be a non-empty {class index: weight} mapping, with target=; "
            f"got {class_weight!r} and target={target!r}"
        )
    classes = {check_int("class_weight class", c, 0, 1 << 24): w for c, w in class_weight.items()}
    table = [1.0] * (max(classes) + 1)
    for c, w in classes.items():
        if isinstance(w, bool) or not isinstance(w, Real) or not 0 <= float(w) < float("inf"):
            raise ValueError(f"class_weight[{c}] must be a finite number >= 0, got {w!r}")
        table[c] = float(w)
    return tuple(table)


def _element(batch: Mapping[str, Value], element: Element) -> Any:
    values = {k: to_host(batch[k]) for k in element.needs(list(batch))}

    def weights() -> np.ndarray:  # called only for an element with a target
        return element.weigh(values[str(element.target)], to_host(batch["is_pad"]))

    return element.build(values, weights)


def _signature(loader: StoreLoader, element: Element) -> Any:
    """The element spec: the first batch of the loader's epoch, read, then the loader reset."""
    saved = loader.state_dict()
    passing = iter(loader)
    try:
        first = next(passing)  # every epoch serves a batch: StoreLoader refuses one that does not
    finally:
        passing.close()  # type: ignore[attr-defined]
        loader.load_state_dict(saved)
    element.check(list(first))
    spec = {k: _spec(to_tf(v)) for k, v in first.items()}
    return element.build(spec, lambda: tf.TensorSpec((None,), tf.float32))


def _spec(value: Any) -> Any:
    return tf.TensorSpec((None, *value.shape[1:]), value.dtype)
