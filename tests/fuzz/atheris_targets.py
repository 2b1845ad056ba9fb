"""Coverage-guided fuzz targets (atheris, libFuzzer for Python) for every parser of kafkalog.storage.

Each target takes the fuzzer's bytes and checks the contract of ``fuzz_targets.py``: the parser succeeds or
raises a :class:`KafkaLogError` (with a reason) -- any other exception is a crash, and so is a hang or an
allocation past libFuzzer's ``-rss_limit_mb``. ``differential`` runs the native core and the Python decoders
on the same bytes: the same records, or the same error class, byte position and reason.

Run one (the seeds come from ``seed_corpus.py``)::

    python tests/fuzz/atheris_targets.py TARGET [CORPUS_DIR...] [-runs=N] [-max_total_time=S] ...

``make fuzz`` runs every target for a counted number of inputs (``tests/fuzz/run_fuzz.py``).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_targets as ft  # noqa: E402

from kafkalog.storage.errors import KafkaLogError  # noqa: E402

TARGETS: dict[str, Callable[[bytes], None]] = {}


def target(name: str):
    def register(fn):
        TARGETS[name] = fn
        return fn
    return register


def _contract(fn, *args):
    """Call a parser: a KafkaLogError (with a reason) is an answer, anything else escapes (a crash)."""
    try:
        return fn(*args)
    except KafkaLogError as e:
        assert e.reason, f"an error must say what was expected: {e!r}"
        return None


# ------------------------------------------------------------------------------------------- record batches
@target("records")
def records(data: bytes) -> None:
    """The log scanner over v2 batches: every accessor, the records, chunked decoding, rebuild of what parses."""
    ft.scan_target(data)
    from kafkalog.storage.records import LogScanner, RecordBatch
    try:
        for b in LogScanner(data, path="fuzz.log", decompress_limit=ft.LIMIT):
            if isinstance(b, RecordBatch):
                try:
                    for _ in b.record_chunks(True, 3):
                        pass
                except KafkaLogError as e:
                    ft._check(e)
    except KafkaLogError as e:
        ft._check(e)


@target("legacy")
def legacy(data: bytes) -> None:
    """The same scanner on v0/v1 messages (seeded with them): wrappers, inner messages, legacy CRCs."""
    ft.scan_target(data)


@target("decompress")
def decompress(data: bytes) -> None:
    """The decompressors (gzip, snappy/xerial, lz4/Kafka frame, zstd), bounded by the decompression limit."""
    if not data:
        return
    codec = 1 + data[0] % 4
    magic = 2 if codec == 4 else (data[0] >> 2) % 3
    ft.decompress_target(codec, magic, data[1:])


@target("varint")
def varint(data: bytes) -> None:
    ft.varint_target(data)


# ---------------------------------------------------------------------------------------------- index files
def _index(cls, data: bytes) -> None:
    base = 1000
    idx = _contract(cls.from_bytes, data, base, "fuzz.index")
    if idx is None:
        return
    idx.entries, idx.valid_entries, idx.padding_entries  # noqa: B018
    _contract(idx.sanity_check)
    for key in (0, base, base + 7, 1 << 40):
        _contract(idx.lookup, key)


@target("index")
def offset_index(data: bytes) -> None:
    from kafkalog.storage.files.offset_index import OffsetIndex
    _index(OffsetIndex, data)


@target("timeindex")
def time_index(data: bytes) -> None:
    from kafkalog.storage.files.time_index import TimeIndex
    _index(TimeIndex, data)


@target("txnindex")
def txn_index(data: bytes) -> None:
    from kafkalog.storage.files.txn_index import TransactionIndex
    idx = _contract(TransactionIndex.from_bytes, data, 1000, "fuzz.txnindex")
    if idx is None:
        return
    _contract(lambda: list(idx))
    _contract(idx.sanity_check)


# ---------------------------------------------------------------------------------- a data dir's small files
def _small(name: str) -> Callable[[bytes], None]:
    def run(data: bytes) -> None:
        ft.small_file_target(name, data)
    return run


SMALL_TARGETS = {
    "checkpoint": "recovery-point-offset-checkpoint",
    "leader-epoch": "leader-epoch-checkpoint",
    "partition-metadata": "partition.metadata",
    "meta-properties": "meta.properties",
    "clean-shutdown": ".kafka_cleanshutdown",
    "quorum-state": "quorum-state",
    "snapshot": ".snapshot",
}
for _t, _n in SMALL_TARGETS.items():
    TARGETS[_t] = _small(_n)


# ------------------------------------------------------------------------- record key/value decoders
@target("decoders")
def decoders(data: bytes) -> None:
    """The internal topics' key/value decoders (__consumer_offsets, __transaction_state, __cluster_metadata),
    on a key/value split of the input."""
    from kafkalog.storage.decoders.cluster_metadata import decode_metadata_record
    from kafkalog.storage.decoders.consumer_offsets import decode_offsets_record
    from kafkalog.storage.decoders.transaction_state import decode_transaction_record
    if not data:
        return
    cut = data[0] % max(1, len(data))
    key, value = data[1:1 + cut], data[1 + cut:]
    value_or_none = None if data[0] & 0x80 and not value else value
    _contract(decode_offsets_record, key, value_or_none)
    _contract(decode_transaction_record, key, value_or_none)
    _contract(decode_metadata_record, data[1:])


# -------------------------------------------------------------------------- native core vs Python decoders
def _fields(r) -> tuple:
    if isinstance(r, tuple):
        return r
    return (r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers], r.attributes,
            r.timestamp_delta, r.offset_delta, r.sequence, r.magic, r.crc)


def _outcome(fn):
    """Records' fields, or the error as (class, position, reason)."""
    try:
        return [_fields(r) for r in fn()]
    except KafkaLogError as e:
        ft._check(e)
        return ("error", type(e).__name__, e.position, e.reason)


def _both(fn):
    """``fn`` with the native core, then with the Python decoders only (the reference)."""
    from kafkalog.storage.codec.native import backend

    native = _outcome(fn)
    with backend("python"):  # the Python codec packages decompress too
        python = _outcome(fn)
    return native, python


_V2 = struct.Struct(">qiiBIhiqqqhii")


@target("differential")
def differential(data: bytes) -> None:
    """Native vs Python on the same bytes: every v2 batch's records (whole, as tuples, in chunks), the native
    records decoder against the careful one on the records section, the cleaner's loops against their Python
    twins, the v0/v1 decoder (records, tuples, Arrow rows) and the legacy converter against
    ``plain_legacy_to_v2``."""
    from kafkalog.storage.codec.native import core
    from kafkalog.storage.engine.cleaner import records as cr
    from kafkalog.storage.engine.cleaner.offset_map import OffsetMap
    from kafkalog.storage.engine.convert import plain_legacy_to_v2
    from kafkalog.storage.records import LogScanner, RecordBatch
    from kafkalog.storage.records import batch as batch_mod
    from kafkalog.storage.records.legacy import LegacyBatch
    from kafkalog.storage.records.record_grammar import Slow
    assert core is not None, "the compiled core is not built: nothing to compare"
    try:
        batches = list(LogScanner(data, path="fuzz.log", decompress_limit=ft.LIMIT))
    except KafkaLogError as e:
        ft._check(e)
        batches = []
    for b in batches:
        try:
            _differential_batch(b, data, core, cr, OffsetMap, Slow, plain_legacy_to_v2, RecordBatch, LegacyBatch,
                                batch_mod)
        except KafkaLogError as e:  # a header the scanner let through but an accessor rejects
            ft._check(e)


def _differential_batch(b, data, core, cr, OffsetMap, Slow, plain_legacy_to_v2, RecordBatch, LegacyBatch,
                        batch_mod) -> None:
    if isinstance(b, RecordBatch):
        for fn in (b.records, b.record_tuples, lambda b=b: [r for c in b.record_chunks(True, 2) for r in c]):
            native, python = _both(fn)
            assert native == python, f"native {native!r} != python {python!r}"
        # the native decoder on the records section against the careful decoder
        if b.codec == 0:
            h = b._header()
            section = bytes(data[b.position + 61:b.position + b.size])
            append_ts = h[8] if h[5] & 0x08 else None
            got = core.decode_records(section, h[12], h[0], h[7], append_ts, h[11], False)
            try:
                careful = batch_mod._decode_careful(b, section, h[12], False)[0]
            except KafkaLogError:
                careful = None
            if got is not None:
                assert careful is not None and list(got[0]) == [tuple(r) for r in careful], (got, careful)
            # the cleaner's loops, native and Python, on the same section: the same verdict
            if h[12] >= 0:
                _cleaner(cr, OffsetMap, Slow, core, section, h[12], h[0], h[7])
    if isinstance(b, LegacyBatch):
        # v0/v1 entries (plain and wrappers): the core's records and tuples (legacy.rs) against legacy.py's,
        # and the Arrow builder takes exactly the entries the decoder takes, with as many rows
        for fn in (b.records, b.record_tuples):
            native, python = _both(fn)
            assert native == python, f"native {native!r} != python {python!r}"
        got = core.legacy_records(b.buf, ft.LIMIT, False)
        rows = core.ArrowRecords().add_legacy(b.buf, b.position, 0, None, ft.LIMIT)
        assert (rows is None) == (got is None) and (got is None or rows == len(got)), (rows, got)
    if isinstance(b, LegacyBatch) and b.codec == 0:
        entry = bytes(data[b.position:b.position + b.size])
        chunk, metas, pos = core.legacy_to_v2(entry, 0, len(entry), 1 << 20)
        n, nbytes, pos2 = core.legacy_plain_run(entry, 0, len(entry))
        assert pos == pos2 and len(metas) == n
        try:
            want = plain_legacy_to_v2(b)
        except KafkaLogError:
            want = None
        if n:  # taken natively: exactly the Python bytes
            assert want is not None and chunk == want, (chunk, want)


@target("arrow-views")
def arrow_views(data: bytes) -> None:
    """The zero-copy Arrow path against the copying one on the same bytes, as a segment's mapping
    (``iter_arrow(views=True)``: key and value as views into the mapping, a compressed batch's into its
    decompressed records): the same rows, or the same error (class, position, reason). The views stay valid
    once the reader, the memoryview and the mapping's owner are gone (the mapping cannot be closed while one
    lives), and nothing keeps the mapping once the last view goes."""
    import mmap
    import weakref

    from kafkalog.storage.codec.native import core
    assert core is not None, "the compiled core is not built: nothing to fuzz"
    if not data:
        return
    m = mmap.mmap(-1, len(data))
    m.write(data)
    mv = memoryview(m)
    copied, viewed = _arrow_of(mv, False), _arrow_of(mv, True)
    if isinstance(copied, tuple) or isinstance(viewed, tuple):
        assert copied == viewed, f"copies {copied!r} != views {viewed!r}"
        return
    assert _same_rows(viewed, copied), f"views {viewed!r} != copies {copied!r}"
    gone = weakref.ref(m)
    for close in (mv.release, m.close):  # refused while a view holds the bytes exported
        try:
            close()
        except BufferError:
            assert viewed, "exported with no view alive"
    del mv, m, close  # (no cycle holds them: freed now, but for the views' exports)
    junk = [bytearray(len(data)) for _ in range(4)]  # (memory freed too early would be reused here)
    assert _same_rows(viewed, copied), "the views changed once their mapping's owner was gone"
    del viewed, junk
    assert gone() is None, "the mapping outlives its last view"


def _arrow_of(mv, views: bool):
    """``iter_arrow``'s batches of ``mv`` (small ones), or its error as (class, position, reason)."""
    from kafkalog.storage.records.columns import iter_arrow
    try:
        return list(iter_arrow(mv, include_control=True, views=views, rows=64))
    except KafkaLogError as e:
        ft._check(e)
        return ("error", type(e).__name__, e.position, e.reason)


def _same_rows(viewed: list, copied: list) -> bool:
    """The same batches, views read as binary (Arrow's equality: timestamps past Python's datetime compare too)."""
    return len(viewed) == len(copied) and all(v.cast(c.schema).equals(c) for v, c in zip(viewed, copied, strict=True))


def _cleaner(cr, OffsetMap, Slow, core, section: bytes, count: int, base: int, base_ts: int) -> None:
    """The cleaner's map and retain passes three ways on one records section: the native map
    (``OffsetMapCore``), the core's loops over the dict map, and the Python loops: the same puts and the same
    retained records, unless one of them sends the batch to the careful path ("slow")."""
    def run(way: str):
        m = OffsetMap(memory=1 << 20) if way == "native-map" else OffsetMap(memory=1 << 20, spill_keys=1 << 20)
        py = way == "python"
        try:
            (cr.py_map_records if py else cr.map_records)(section, count, base, m)
        except (Slow, IndexError, KafkaLogError):
            return "slow"
        if m.native is not None:
            puts = sorted((bytes(d), o) for d, o in m.native.items())
        else:
            puts = sorted((bytes(d), c[0]) for d, c in m.cells.items())
        latest = max((o for _, o in puts), default=base)
        out = []
        for keep in (False, True):
            try:
                kept, read, invalid = (cr.py_scan_retained if py else cr.scan_retained)(
                    section, count, base, base_ts, latest, m, keep)
                out.append(([tuple(k) for k in kept], read, invalid))
            except (Slow, IndexError, KafkaLogError):
                out.append("slow")
        return puts, out

    results = [r for r in (run("native-map"), run("core"), run("python")) if r != "slow"]
    for other in results[1:]:
        assert other[0] == results[0][0], ("puts", results)
        for a, b in zip(other[1], results[0][1], strict=False):
            if a != "slow" and b != "slow":
                assert a == b, ("retained", results)


# ------------------------------------------------------------------------- the JSON Lines commands read
def _lines_file() -> Path:
    """A file of this process for the line readers (which take a path), on tmpfs where there is one."""
    import atexit
    import os
    import tempfile

    f = Path("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()) / f"kafkalog-fuzz-{os.getpid()}.jsonl"
    atexit.register(lambda: f.unlink(missing_ok=True))
    return f


_LINES_FILE = _lines_file()


@target("input-lines")
def input_lines(data: bytes) -> None:
    """The JSON Lines that ``import`` (exported rows) and ``append`` (``dump --json`` batches or single records)
    read, as each reads them (the file opened as UTF-8): every row checked, grouped into batches and each batch
    built; every append line built into a batch (base64 or, if the first byte is odd, utf8 payloads). Only a
    ``KafkaLogError`` may come out: a crafted line once made both exit 3."""
    import types

    from kafkalog.storage.engine.import_ import _build, _group, iter_rows
    from kafkalog.tools.append import _batches

    if not data:
        return
    payload, data = ("utf8" if data[0] & 1 else "base64"), data[1:]
    _LINES_FILE.write_bytes(data)
    def rows() -> None:
        for where, batch_rows in _group(iter_rows(_LINES_FILE)):
            _build(batch_rows, where)

    def batches() -> None:
        with open(_LINES_FILE, encoding="utf-8") as src:
            for _ in _batches(src, types.SimpleNamespace(source=str(_LINES_FILE), payload=payload)):
                pass

    _contract(rows)  # errors name the file and line (no byte position: these are text lines)
    _contract(batches)


# ------------------------------------------------------------------------------------ all, for the CI slice
def _all(data: bytes) -> None:
    """Every target in one process (the bounded CI slice): the first byte picks the target."""
    if not data:
        return
    names = ALL_ORDER
    TARGETS[names[data[0] % len(names)]](data[1:])


ALL_ORDER = list(TARGETS)
TARGETS["all"] = _all


# -------------------------------------------------------------------------------------------------- main
INSTRUMENT = ("kafkalog.storage", "kafkalog.tools.append")


def _instrument(atheris) -> int:
    """``atheris.instrument_func`` on every function and method of the loaded ``INSTRUMENT`` modules."""
    import inspect
    import types
    done = 0
    seen: set[int] = set()

    def fix(owner, name, obj) -> None:
        nonlocal done
        if isinstance(obj, types.FunctionType) and id(obj) not in seen and obj.__module__.startswith(INSTRUMENT):
            seen.add(id(obj))
            atheris.instrument_func(obj)  # patches the code object in place
            done += 1

    for modname, mod in list(sys.modules.items()):
        if not modname.startswith(INSTRUMENT) or mod is None:
            continue
        for name, obj in list(vars(mod).items()):
            fix(mod, name, obj)
            if inspect.isclass(obj) and obj.__module__ == modname:
                for an, attr in list(vars(obj).items()):
                    if isinstance(attr, (staticmethod, classmethod)):
                        attr = attr.__func__
                    elif isinstance(attr, property):
                        for f in (attr.fget, attr.fset):
                            if f is not None:
                                fix(obj, an, f)
                        continue
                    fix(obj, an, attr)
    return done


# ------------------------------------------------------------------------------ memory, replaying a corpus
MEMORY_PER_INPUT_BYTE = 64  # the native runs' bound (-malloc_limit_mb=64 for inputs up to 1 MiB)


def memory_bound(size: int) -> int:
    """The Python allocations one input may peak at: 64 times its size (as the native runs' malloc limit),
    plus twice the decompression limit (a decompressed section and what is decoded from it)."""
    return MEMORY_PER_INPUT_BYTE * size + 2 * ft.LIMIT


def replay_memory(name: str, corpus: Path) -> dict:
    """Every input of a corpus run once more, uninstrumented, with ``tracemalloc``: the peak of the Python
    allocations each makes (above what was held before it; one-time caches are warmed by a first pass), the
    worst, and how many exceed ``memory_bound``. atheris has no allocation hook on CPython, so this is the Python
    targets' measure; the compiled core's allocations are bounded in its own (cargo-fuzz) runs."""
    import tracemalloc

    fn = TARGETS[name]
    # read once, up front: a fuzzer still running on the same corpus (libFuzzer's -jobs, or a second process)
    # replaces the inputs it reduces, so a file listed here may be gone a moment later
    units = []
    for p in sorted(corpus.iterdir()):
        try:
            units.append((p, p.read_bytes()))
        except (FileNotFoundError, IsADirectoryError):
            continue
    for _, data in units:
        fn(data)
    tracemalloc.start()
    worst = {"peak": 0, "size": 0, "unit": None}
    over = []
    try:
        for u, data in units:
            tracemalloc.reset_peak()
            held = tracemalloc.get_traced_memory()[0]
            fn(data)
            peak = tracemalloc.get_traced_memory()[1] - held
            if peak > worst["peak"]:
                worst = {"peak": peak, "size": len(data), "unit": u.name}
            if peak > memory_bound(len(data)):
                over.append(u.name)
    finally:
        tracemalloc.stop()
    return {"replay_units": len(units), "replay_peak_bytes": worst["peak"], "replay_peak_input_bytes": worst["size"],
            "replay_peak_unit": worst["unit"], "replay_over_bound": len(over), "replay_over_bound_units": over[:10]}


def main(argv: list[str]) -> None:
    if len(argv) == 4 and argv[1] == "--replay-memory":
        import json
        print(json.dumps(replay_memory(argv[2], Path(argv[3]))))
        return
    import atheris
    if len(argv) < 2 or argv[1] not in TARGETS:
        sys.exit(f"usage: {argv[0]} TARGET [libFuzzer args]; targets: {', '.join(TARGETS)}")
    name = argv[1]
    fn = TARGETS[name]
    # everything the targets reach is imported by now (fuzz_targets imports the records layer): instrument
    # the loaded kafkalog modules' functions in place for coverage
    import kafkalog.storage.codec.compression  # noqa: F401
    import kafkalog.storage.decoders.cluster_metadata  # noqa: F401
    import kafkalog.storage.decoders.consumer_offsets  # noqa: F401
    import kafkalog.storage.decoders.transaction_state  # noqa: F401
    import kafkalog.storage.engine.cleaner.records  # noqa: F401
    import kafkalog.storage.engine.convert  # noqa: F401
    import kafkalog.storage.files  # noqa: F401
    import kafkalog.storage.records  # noqa: F401
    import kafkalog.tools.append  # noqa: F401
    _instrument(atheris)

    def one(data: bytes) -> None:
        fn(bytes(data))

    atheris.Setup([argv[0]] + argv[2:], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
