"""Running partition work in parallel: processes for CPU, threads for fsync waits (one place for every engine)."""

from __future__ import annotations

IO_THREADS = 16  # partitions handled at once per process: their fsyncs are committed together (jbd2 group commit)


def run_partition_tasks(fn, tasks: list, *, workers: int = 1, threads: int = IO_THREADS, progress=None) -> list:
    """``[fn(t) for t in tasks]`` across ``workers`` processes, each running ``threads`` threads.

    Partition work is dominated by waiting for fsync, which a thread releases the GIL for: many partitions in
    flight let the filesystem commit their fsyncs together. Tasks travel to the processes in chunks (paths, not
    data), so the inter-process cost is per chunk. ``progress(n)`` is called as tasks finish."""
    if not tasks:
        return []
    workers = max(1, min(workers, len(tasks)))
    if workers == 1:
        return _thread_map(fn, tasks, threads, progress)
    from concurrent.futures import ProcessPoolExecutor

    nchunks = min(len(tasks), workers * 8)
    chunks = [tasks[i::nchunks] for i in range(nchunks)]  # interleaved: big and small partitions mixed
    out: list = [None] * len(tasks)
    with ProcessPoolExecutor(workers) as ex:
        futures = {ex.submit(_thread_map, fn, c, threads, None): i for i, c in enumerate(chunks)}
        from concurrent.futures import as_completed

        for fut in as_completed(futures):
            i = futures[fut]
            for j, r in enumerate(fut.result()):
                out[i + j * nchunks] = r
            if progress is not None:
                progress(len(chunks[i]))
    return out


def _thread_map(fn, tasks: list, threads: int, progress) -> list:
    if threads <= 1 or len(tasks) == 1:
        out = []
        for t in tasks:
            out.append(fn(t))
            if progress is not None:
                progress(1)
        return out
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, len(tasks))) as ex:
        out = []
        for r in ex.map(fn, tasks):
            out.append(r)
            if progress is not None:
                progress(1)
        return out
