"""Running partition work in parallel: processes for CPU, threads for fsync waits (one place for every engine)."""

from __future__ import annotations

import contextvars
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from typing import Any

IO_THREADS = 16  # partitions handled at once per process: their fsyncs are committed together (jbd2 group commit)


def run_partition_tasks(fn, tasks: list, *, workers: int = 1, threads: int = IO_THREADS, progress=None,
                        weights: list[int] | None = None) -> list:
    """``[fn(t) for t in tasks]`` across ``workers`` processes, each running ``threads`` threads.

    Partition work is dominated by waiting for fsync, which a thread releases the GIL for: many partitions in
    flight let the filesystem commit their fsyncs together. Tasks travel to the processes in chunks (paths, not
    data), so the inter-process cost is per chunk. ``progress(n)`` is called as tasks finish: ``n`` tasks, or
    with ``weights`` (one per task, e.g. its bytes) the total weight of the tasks finished."""
    if not tasks:
        return []
    if weights is not None and len(weights) != len(tasks):
        raise ValueError("one weight per task")
    workers = max(1, min(workers, len(tasks)))
    if workers == 1:
        return _thread_map(fn, tasks, threads, progress if weights is None or progress is None
                           else _in_order(progress, weights))

    nchunks = min(len(tasks), workers * 8)
    chunks = [tasks[i::nchunks] for i in range(nchunks)]  # interleaved: big and small partitions mixed
    out: list = [None] * len(tasks)
    with ProcessPoolExecutor(workers) as ex:
        futures = {ex.submit(_thread_map, fn, c, threads, None): i for i, c in enumerate(chunks)}

        for fut in as_completed(futures):
            i = futures[fut]
            for j, r in enumerate(fut.result()):
                out[i + j * nchunks] = r
            if progress is not None:
                progress(len(chunks[i]) if weights is None else sum(weights[i::nchunks]))
    return out


def iter_partition_tasks(fn, tasks: list, *, workers: int = 1, ahead: int | None = None) -> Generator[Any, None, None]:
    """``fn(t) for t in tasks``, yielded in task order, with ``workers`` processes running at most ``ahead``
    tasks (default ``2 * workers``) beyond the one the caller waits for: for results that must be consumed in
    order (written out) while what is in flight stays bounded. One task per process call (a task is a file or a
    partition: big enough to pay for its round trip)."""
    workers = max(1, min(workers, len(tasks)))
    if workers == 1:
        for t in tasks:
            yield fn(t)
        return

    limit = max(1, ahead if ahead is not None else 2 * workers)
    with ProcessPoolExecutor(workers) as ex:
        pending: deque = deque()
        it = iter(tasks)
        try:
            for t in it:
                pending.append(ex.submit(fn, t))
                if len(pending) > limit:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:  # the caller stopped (an error): do not run what is left
                f.cancel()


def iter_thread_streams(make: Callable[[Any], Iterable[Any]], tasks: list, *, threads: int,
                        ordered: bool = True, drop: Callable[[Any], None] | None = None) -> Iterator[Any]:
    """The items of ``make(t)`` for each task, task after task, in order, while up to ``threads`` threads produce
    them: each thread runs one task's iterator at a time and holds at most one item the caller has not taken (it
    makes the next only once the caller took it), so at most ``threads`` items are in flight whatever the tasks'
    sizes. For work that releases the GIL (the compiled core's decoding). The threads run in the caller's context
    (``contextvars``: the backend in force); an exception of ``make`` reaches the caller where its task's items
    end. A caller that stops early (``close()``, or an error) stops the threads: each finishes the item it is
    making and exits; so does each at the interpreter's exit, when the caller never came back.

    ``ordered=False``: each item as soon as a thread has made it (the earliest task's first when several wait),
    each task's items still in their order: no thread waits for the caller to reach its task, so all ``threads``
    keep working whatever the tasks' sizes (with ``ordered``, a thread a task ahead waits once it holds one item);
    an exception of ``make`` reaches the caller when its task ends.

    However the caller stops (done, ``close()``, an error, the generator dropped), by the time it has stopped the
    threads have ended (each after the item it was making) and ``drop(t)`` was called for each task no thread
    started: what the tasks hold is let go of then, never left to the garbage collector."""
    threads = max(1, min(threads, len(tasks)))
    if threads == 1:
        started = 0
        try:
            for t in tasks:
                started += 1
                yield from make(t)
        finally:
            for t in tasks[started:]:
                if drop is not None:
                    drop(t)
        return
    shared = None if ordered else threading.Condition()
    slots = [_Slot(shared) for _ in tasks]
    claim = iter(range(len(tasks)))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                i = next(claim, None)
            if i is None:
                return
            slot = slots[i]
            if slot._stopped:  # (claimed as the caller stopped: never started)
                if drop is not None:
                    drop(tasks[i])
                continue
            taken = True
            try:
                it = iter(make(tasks[i]))
                try:
                    for item in it:
                        if not (taken := slot.put(item)):
                            break  # the caller stopped (or the interpreter is exiting)
                finally:
                    close = getattr(it, "close", None)
                    if close is not None:
                        close()
            except BaseException as e:  # noqa: BLE001 - handed to the caller, raised there in task order
                slot.end(e)
                return
            if not taken and not slot._stopped:
                return  # (the interpreter is exiting)
            slot.end(None)  # (and on: once the caller stopped, the tasks left are dropped)

    ctx = contextvars.copy_context()
    workers = [threading.Thread(target=ctx.copy().run, args=(work,), name=f"kafkalog-reader-{n}")
               for n in range(threads)]
    for w in workers:
        w.start()
    try:
        if shared is None:
            for slot in slots:
                yield from slot.items()
        else:
            yield from _any_order(slots, shared)
    finally:
        for slot in slots:
            slot.stop()
        # each thread ends after the item it is making, letting go of its task, and drops the tasks left; when the
        # collector finalizes a dropped stream on one of them, that one does so once back (no waiting there: a
        # thread may wait for the item that one is making, or for a lock it holds)
        if threading.current_thread() not in workers:
            for w in workers:
                w.join()
            with lock:  # (those of threads ended by an error)
                left = list(claim)
            for i in left:
                if drop is not None:
                    drop(tasks[i])


def _any_order(slots: list[_Slot], cv: threading.Condition) -> Iterator[Any]:
    """The items of ``slots`` (sharing the condition ``cv``) as they are made: the earliest slot's holding one."""
    live = list(slots)
    while live:
        with cv:
            while (ready := next((s for s in live if s._full or s._ended), None)) is None:
                cv.wait()
            if not ready._full:  # (ended: its error, if any, is the caller's now)
                live.remove(ready)
                if ready._error is not None:
                    raise ready._error
                continue
            item = ready._take()
        yield item


class _Slot:
    """One task's items from its thread to the caller: at most one waiting (``put`` returns once it is taken, or
    False when the caller stopped or the interpreter is exiting)."""

    _DONE = object()

    def __init__(self, cv: threading.Condition | None = None) -> None:
        self._cv = threading.Condition() if cv is None else cv  # (one shared by the slots read in any order)
        self._item: Any = self._DONE
        self._full = False
        self._ended = False
        self._error: BaseException | None = None
        self._stopped = False

    def put(self, item: Any) -> bool:
        with self._cv:
            self._item, self._full = item, True
            self._cv.notify_all()
            while self._full and not self._stopped:
                # (woken now and then: at the interpreter's exit nobody will take it)
                if not self._cv.wait(0.25) and not threading.main_thread().is_alive():
                    return False
            return not self._stopped

    def end(self, error: BaseException | None) -> None:
        with self._cv:
            self._ended, self._error = True, error
            self._cv.notify_all()

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._item, self._full = self._DONE, False
            self._cv.notify_all()

    def _take(self) -> Any:
        """The item held (``_full``; under the condition's lock), the thread told it may make the next."""
        item, self._item, self._full = self._item, self._DONE, False
        self._cv.notify_all()
        return item

    def items(self) -> Iterator[Any]:
        while True:
            with self._cv:
                while not self._full and not self._ended:
                    self._cv.wait()
                if self._full:
                    item = self._take()
                elif self._error is not None:
                    error, self._error = self._error, None
                    raise error
                else:
                    return
            yield item


def _in_order(progress, weights: list[int]):
    """``progress`` for :func:`_thread_map`, which finishes tasks in order: ``n`` tasks -> their weight."""
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        progress(sum(weights[done:done + n]))
        done += n
    return advance


def _thread_map(fn, tasks: list, threads: int, progress) -> list:
    if threads <= 1 or len(tasks) == 1:
        out = []
        for t in tasks:
            out.append(fn(t))
            if progress is not None:
                progress(1)
        return out

    with ThreadPoolExecutor(min(threads, len(tasks))) as ex:
        out = []
        for r in ex.map(fn, tasks):
            out.append(r)
            if progress is not None:
                progress(1)
        return out
