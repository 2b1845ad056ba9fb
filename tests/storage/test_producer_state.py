import pytest

from kafkalog.storage.errors import CorruptRecordError
from kafkalog.storage.files.producer_snapshot import ProducerSnapshot, read_producer_snapshot
from kafkalog.storage.log.producer_state import ProducerStateManager, java_hashmap_order
from kafkalog.storage.records import build_batch, build_end_txn_marker, iter_batches


def _b(data):
    return next(iter_batches(data))


def test_java_hashmap_order():
    # Long.hashCode buckets in a 16-slot table: 17 -> bucket 1, 2 -> 2, 16 -> 0
    assert java_hashmap_order([17, 2, 16]) == [16, 17, 2]


def test_transactions_and_aborted_index_entries(tmp_path):
    psm = ProducerStateManager(tmp_path)
    d1 = build_batch([(0, 10, b"k", b"v")], producer_id=5, producer_epoch=1, base_sequence=0,
                     is_transactional=True)
    d2 = build_batch([(1, 11, b"k", b"v")], producer_id=6, producer_epoch=0, base_sequence=0,
                     is_transactional=True)
    m1 = build_end_txn_marker(offset=2, producer_id=5, producer_epoch=1, coordinator_epoch=4, commit=False,
                              timestamp=12)
    assert psm.replay(_b(d1)) is None
    assert psm.replay(_b(d2)) is None
    aborted = psm.replay(_b(m1))
    assert aborted is not None
    assert (aborted.first_offset, aborted.last_offset, aborted.last_stable_offset) == (0, 2, 1)
    assert psm.first_unstable_offset == 1
    e = psm.producers[5]
    assert e.coordinator_epoch == 4 and e.current_txn_first_offset is None and e.last_timestamp == 12
    assert psm.map_end_offset == 3
    path = psm.take_snapshot()
    assert path.name == "00000000000000000003.snapshot"
    snap = read_producer_snapshot(path)
    assert {x.producer_id for x in snap} == {5, 6}
    assert [x.current_txn_first_offset for x in snap if x.producer_id == 6] == [1]
    # reload
    psm2 = ProducerStateManager(tmp_path)
    psm2.truncate_and_reload(0, 3, now_ms=20)
    assert psm2.map_end_offset == 3 and psm2.producers[6].current_txn_first_offset == 1


def test_empty_snapshot_bytes():
    assert ProducerStateManager(None).snapshot_bytes() == bytes.fromhex("000148674bc700000000")
    assert ProducerSnapshot().to_bytes() == bytes.fromhex("000148674bc700000000")


def test_expired_producers_dropped_on_load(tmp_path):
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=100)
    psm.replay(_b(build_batch([(0, 10, b"k", b"v")], producer_id=9, producer_epoch=0, base_sequence=0)))
    psm.take_snapshot()
    psm2 = ProducerStateManager(tmp_path, producer_id_expiration_ms=100)
    psm2.load_from_snapshot(0, now_ms=200)
    assert psm2.is_empty and psm2.map_end_offset == 1


def test_stray_snapshots(tmp_path):
    for off in (0, 5, 7, 9, 12):
        (tmp_path / f"{off:020d}.snapshot").write_bytes(ProducerSnapshot().to_bytes())
    psm = ProducerStateManager(tmp_path)
    psm.remove_stray_snapshots([0, 10])
    assert sorted(psm.snapshots) == [0, 12]


def test_data_batches_replayed_from_the_header_alone():
    raw = bytearray(build_batch([(None, 10, b"k", b"v" * 50), (None, 15, b"k", b"v")], base_offset=7, producer_id=3,
                                producer_epoch=2, base_sequence=40, is_transactional=True))
    raw[61:72] = b"\xff" * 11  # garbage records: never decoded for a data batch
    with pytest.raises(CorruptRecordError):
        _b(bytes(raw)).records()
    psm = ProducerStateManager(None)
    assert psm.replay(_b(bytes(raw))) is None
    e = psm.producers[3]
    assert (e.producer_epoch, e.first_seq, e.last_seq, e.last_data_offset, e.last_timestamp) == (2, 40, 41, 8, 15)
    assert e.current_txn_first_offset == 7 and psm.ongoing_txns == {7: 3} and psm.map_end_offset == 9
