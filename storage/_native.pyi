"""Types of the compiled record core, ``kafkalog.storage._native`` (``storage/native``, Rust + PyO3).

Every name the extension module registers (``storage/native/src/lib.rs``) is here, with the signature of its
``#[pyfunction]``/``#[pymethods]`` definition; ``tests/storage/test_native_stub.py`` holds the two together.
The contract of the core: a function returns exactly what its Python twin returns for the same bytes, or
``None`` ("unusual input"), and the Python careful decoder then gives the verdict.

Arguments typed ``Buffer`` are read in place through the buffer protocol (``bytes``, ``bytearray``,
``memoryview``, ``mmap``); those typed ``bytes`` must be ``bytes``.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Literal, final, overload

from typing_extensions import Buffer

# (header key, header value): the key is text (the careful decoder keeps non-UTF-8 keys with surrogateescape)
_Header = tuple[str, bytes | None]
# a record as a tuple: (offset, timestamp, key, value, headers)
_Row = tuple[int, int, bytes | None, bytes | None, tuple[_Header, ...]]
# a v0/v1 message as a tuple: (offset, timestamp, key, value, ()) -- no headers below v2
_LegacyRow = tuple[int, int, bytes | None, bytes | None, tuple[()]]
# what `dump --deep` shows of a v0/v1 message: (offset, timestamp, key, value, magic, crc, valid)
_MessageFields = tuple[int, int, bytes | None, bytes | None, int, int, bool]
# the rows to keep: half-open (lo_offset, hi_offset, lo_timestamp, hi_timestamp)
_Keep = tuple[int, int, int, int]
# one retained record of the cleaner: (start, tail, end, timestamp, offset_delta, attributes, is_tombstone)
_Kept = tuple[int, int, int, int, int, int, bool]
# (retained records, records in the batch, keyless records dropped as invalid)
_Retained = tuple[list[_Kept], int, int]
# the batch-level values of add_rows: (timestampType, leaderEpoch, producerId, producerEpoch, isTransactional,
# isControl, magic, codec, position, size)
_BatchMeta = tuple[int, int, int, int, bool, bool, int, str, int, int]

# -- the build

def allocator() -> tuple[str, bool]:
    """The core's allocator and whether its purges decommit memory: ``("mimalloc", False)`` or
    ``("system", False)``."""

def build_info() -> str:
    """The build's self-description for ``kafkalog --version``."""

def codec_versions() -> tuple[str, str, str]:
    """The lz4, zstd and snappy library versions the core compresses with."""

# -- records (batch.rs, legacy.rs)

@final
class Record:
    """The native form of ``storage/records/record.py``'s ``Record`` dataclass (registered under that module):
    the same fields, constructor, equality, repr and pickling, but read-only."""

    __match_args__: ClassVar[tuple[str, ...]]
    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __new__(
        cls,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[_Header] | None = None,
        attributes: int = 0,
        timestamp_delta: int | None = None,
        offset_delta: int | None = None,
        sequence: int = -1,
        magic: int = 2,
        crc: int | None = None,
    ) -> Record: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> list[_Header]: ...
    @property
    def attributes(self) -> int: ...
    @property
    def timestamp_delta(self) -> int | None: ...
    @property
    def offset_delta(self) -> int | None: ...
    @property
    def sequence(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def crc(self) -> int | None: ...
    @property
    def is_tombstone(self) -> bool: ...
    def __eq__(self, other: object) -> bool: ...
    def __ne__(self, other: object) -> bool: ...
    def __reduce__(self) -> tuple[type[Record], tuple[object, ...]]: ...

@overload
def decode_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    base_seq: int,
    full: Literal[True],
    p: int = 0,
    last: bool = True,
) -> tuple[list[Record], int] | None: ...
@overload
def decode_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    base_seq: int,
    full: Literal[False],
    p: int = 0,
    last: bool = True,
) -> tuple[list[_Row], int] | None: ...
@overload
def decode_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    base_seq: int,
    full: bool,
    p: int = 0,
    last: bool = True,
) -> tuple[list[Record] | list[_Row], int] | None:
    """Decode ``count`` records of a v2 records section from byte ``p`` (the native ``_decode_fast``):
    ``(records, next position)``, ``Record`` objects with ``full``, else tuples; with ``last`` the records must
    end the data. ``None``: the careful decoder judges."""

@overload
def decode_compressed(
    data: Buffer,
    codec: int,
    magic: int,
    limit: int,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    base_seq: int,
    full: Literal[True],
) -> tuple[list[Record], int] | None: ...
@overload
def decode_compressed(
    data: Buffer,
    codec: int,
    magic: int,
    limit: int,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    base_seq: int,
    full: Literal[False],
) -> tuple[list[_Row], int] | None: ...
@overload
def decode_compressed(
    data: Buffer,
    codec: int,
    magic: int,
    limit: int,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    base_seq: int,
    full: bool,
) -> tuple[list[Record] | list[_Row], int] | None:
    """``decode_records`` over a compressed records section, decompressed natively (at most ``limit`` bytes)
    and decoded in place; ``None`` when either step meets anything the Python path must judge."""

@overload
def legacy_records(entry: Buffer, limit: int, full: Literal[True]) -> list[Record] | None: ...
@overload
def legacy_records(entry: Buffer, limit: int, full: Literal[False]) -> list[_LegacyRow] | None: ...
@overload
def legacy_records(entry: Buffer, limit: int, full: bool) -> list[Record] | list[_LegacyRow] | None:
    """``LegacyBatch.records()`` (``full``) or ``record_tuples()`` of one v0/v1 shallow entry; ``None`` for the
    Python decoder to judge."""

def legacy_messages(entry: Buffer, limit: int) -> list[_MessageFields] | None:
    """``LegacyBatch.message_fields()`` of one v0/v1 shallow entry; ``None`` for the Python decoder to judge."""

def legacy_to_v2(data: Buffer, pos: int, end: int, max_bytes: int) -> tuple[bytes, list[tuple[int, int, int]], int]:
    """The run of plain v0/v1 messages of ``data[pos:end]`` as v2 batches: ``(batches, [(size, last offset,
    max timestamp)] per batch, position reached)``."""

def legacy_plain_run(data: Buffer, pos: int, end: int) -> tuple[int, int, int]:
    """The run ``legacy_to_v2`` would convert: ``(entries, bytes, position reached)``."""

def scan_crc(buf: Buffer, start: int, end: int, max_batch_size: int | None = None) -> tuple[bytes, bytes, int]:
    """Shallow scan and CRC32C of the complete v2 entries of ``buf[start:end]``: ``(positions as native-endian
    int64s, a validity flag byte per entry, where the scan stopped)``."""

# -- compression (codec.rs)

def lz4_block(data: Buffer, level: int) -> bytes:
    """One raw lz4 block as Kafka's ``Lz4BlockOutputStream`` compresses it."""

def zstd_stream(data: Buffer, level: int) -> bytes:
    """One zstd frame as Kafka's ``ZstdCompression`` writes it."""

def snappy_block(data: Buffer) -> bytes:
    """One raw snappy block as snappy-java compresses it."""

def decompress(codec: int, data: Buffer, magic: int, limit: int) -> bytes | None:
    """Decompress a Kafka payload (codec ids as Kafka's), at most ``limit`` bytes; ``None`` for the Python path
    to decompress (and give its error)."""

# -- Arrow (arrow.rs)

@final
class ArrowChunk:
    """Finished rows, exported once through the Arrow PyCapsule interface: ``pyarrow.record_batch(chunk)``."""

    def __len__(self) -> int: ...
    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]: ...

@final
class ArrowRecords:
    """A builder of the data source's record columns, decoded straight into Arrow buffers (with ``columns``,
    only those: the other columns' buffers are never filled; ``ValueError`` for an unknown name). With ``views``,
    key and value are ``binary_view``: views into the buffers given to ``add_entries``/``add_v2`` (kept exported
    while a view lives) and into compressed batches' decompressed records, copies otherwise. The ``add_*``
    methods but ``add_rows`` release the GIL while they decode."""

    def __new__(cls, capacity: int = 0, columns: Sequence[str] | None = None, views: bool = False) -> ArrowRecords: ...
    def __len__(self) -> int: ...
    @property
    def nbytes(self) -> int:
        """Bytes of log entries added so far."""
    def add_v2(
        self, batch: Buffer, position: int, piece: int, keep: _Keep | None = None, data: bytes | None = None
    ) -> int | None: ...
    def add_entries(
        self,
        buf: Buffer,
        start: int,
        end: int,
        position_base: int,
        piece: int,
        max_rows: int,
        max_bytes: int,
        verify: bool = False,
        stop_attributes: int = 0x07,
        max_count: int = 2147483647,
        limit: int = 0,
    ) -> tuple[int, int, int]:
        """With ``limit`` > 0, compressed batches too, decompressed natively within ``limit`` bytes."""
    def add_rows(
        self,
        rows: Sequence[tuple[int, int, bytes | None, bytes | None, Iterable[_Header]]],
        sequences: Sequence[int],
        piece: int,
        meta: _BatchMeta,
    ) -> None: ...
    def add_legacy(
        self, entry: Buffer, position: int, piece: int, keep: _Keep | None = None, limit: int = 0
    ) -> int | None: ...
    def add_legacy_entries(
        self,
        buf: Buffer,
        start: int,
        end: int,
        position_base: int,
        piece: int,
        max_rows: int,
        max_bytes: int,
        limit: int,
        verify: bool = False,
        plain_only: bool = False,
    ) -> tuple[int, int]: ...
    def finish(self, names: Sequence[tuple[str, int, str]] | None = None) -> ArrowChunk: ...

def arrow_add_compressed(
    builder: ArrowRecords, batch: Buffer, position: int, piece: int, limit: int, keep: _Keep | None = None
) -> int | None:
    """``ArrowRecords.add_v2`` for a compressed batch, its records section decompressed natively (without the
    GIL); ``None`` (nothing added) when the decompression or the batch is unusual."""

# -- the cleaner (cleaner.rs)

def map_records(
    data: bytes,
    count: int,
    base_offset: int,
    raw: dict[bytes, list[int]],
    new_cell: Callable[[bytes, int], object],
) -> bool:
    """The cleaner's map pass over one records section into a map held in Python dicts; ``False``: the careful
    path decides."""

def scan_retained(
    data: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    latest: int,
    raw: dict[bytes, list[int]],
    get_unknown: Callable[[bytes], int],
    keep_tombstones: bool,
) -> _Retained | None:
    """The cleaner's retain pass over one records section against a map held in Python dicts; ``None``: the
    careful path decides."""

@final
class OffsetMapCore:
    """The cleaner's offset map (key MD5 -> latest offset), with a cache of raw keys."""

    def __new__(cls, raw_max_keys: int, raw_max_len: int) -> OffsetMapCore: ...
    @property
    def size(self) -> int: ...
    def clear(self) -> None: ...
    def put(self, key: bytes, offset: int) -> None: ...
    def get(self, key: bytes) -> int: ...
    def get_hash(self, digest: bytes) -> int: ...
    def merge_hash(self, digest: bytes, offset: int, newest: bool = True, key: bytes | None = None) -> None: ...
    def items(self) -> list[tuple[bytes, int]]: ...
    def freeze(self) -> None: ...
    def maps_none_of(self, base_offset: int, last_offset: int) -> bool | None: ...
    def map_records(self, data: bytes, count: int, base_offset: int) -> bool: ...
    def map_batches(self, data: Buffer, pos: int, start: int, capacity: int) -> tuple[int, int | None]: ...
    def scan_retained(
        self, data: bytes, count: int, base_offset: int, base_ts: int, latest: int, keep_tombstones: bool
    ) -> _Retained | None: ...
