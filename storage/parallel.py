"""Running partition work in parallel: processes for CPU, threads for fsync waits (one place for every engine)."""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
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
