"""Internal-topic payload decoders (kafkalog.storage.decoders): byte vectors derived from Kafka's JSON
schemas and unit tests (DumpLogSegmentsTest, MetadataRecordSerdeTest), schema round trips, and fuzzing."""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import pytest
from builders import hex_bytes as h
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.storage.decoders import (
    MetadataState,
    decode_control_record,
    decode_metadata_record,
    decode_offsets_record,
    decode_transaction_record,
    format_control_record,
    format_metadata_record,
    format_offsets_record,
    format_transaction_record,
    kafka_str_to_uuid,
    parse_metadata_record,
    parse_offsets_key,
    parse_offsets_value,
    topic_configs,
    topic_ids,
    uuid_to_kafka_str,
)
from kafkalog.storage.decoders import kraft_control as kc
from kafkalog.storage.decoders import metadata_schemas as ms
from kafkalog.storage.decoders import offsets_schemas as os_
from kafkalog.storage.decoders import transaction_state as ts
from kafkalog.storage.decoders.cluster_metadata import encode_metadata_record
from kafkalog.storage.decoders.common import jackson_dumps, java_double_str, java_string_hash
from kafkalog.storage.decoders.consumer_offsets import decode_consumer_subscription
from kafkalog.storage.decoders.schema import Message
from kafkalog.storage.decoders.spec import Field, Struct
from kafkalog.storage.errors import CorruptRecordError


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


U1 = uuid.UUID(int=1)

# ------------------------------------------------------------------------------------------ all specs


def all_messages() -> list[Message]:
    msgs: dict[int, Message] = {}
    for rt in os_.RECORD_TYPES.values():
        for m in (rt.key, rt.value, *rt.older):
            msgs[id(m)] = m
    for m in (os_.CONSUMER_PROTOCOL_SUBSCRIPTION, os_.CONSUMER_PROTOCOL_ASSIGNMENT, ts.TRANSACTION_LOG_KEY,
              ts.TRANSACTION_LOG_VALUE, kc.LEADER_CHANGE_MESSAGE, kc.SNAPSHOT_HEADER_RECORD,
              kc.SNAPSHOT_FOOTER_RECORD, kc.KRAFT_VERSION_RECORD, kc.VOTERS_RECORD,
              *ms.METADATA_RECORDS.values()):
        msgs[id(m)] = m
    return list(msgs.values())


def message_versions() -> list[tuple[Message, int]]:
    return [(m, v) for m in all_messages() for v in range(m.valid.lo, m.valid.hi + 1)]


MV = message_versions()
MV_IDS = [f"{m.name}-v{v}" for m, v in MV]

# ------------------------------------------------------------------------------ random schema values

_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _st_scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _RANGES:
        b = _RANGES[kind]
        return st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1)
    if kind == "uint16":
        return st.integers(0, 0xFFFF)
    if kind == "uint32":
        return st.integers(0, 0xFFFFFFFF)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "uuid":
        return st.uuids()
    if kind == "string":
        return st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
    if kind == "bytes":
        return st.binary(max_size=12)
    raise AssertionError(kind)


def st_field(e: Any, ctx: Any) -> st.SearchStrategy[Any]:
    f = e.f
    if f.kind == "struct":
        s: st.SearchStrategy[Any] = st_struct(f.struct, ctx, e.possible)
    elif f.kind == "array":
        elem = st_struct(f.struct, ctx, e.possible) if f.struct is not None else _st_scalar(f.elem)
        s = st.lists(elem, max_size=3)
    else:
        s = _st_scalar(f.kind)
    return st.one_of(st.none(), s) if e.nullable else s


def st_struct(struct_: Struct, ctx: Any, possible: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({e.f.key: st_field(e, ctx) for e in struct_.plan(ctx, possible).fields})


def st_message(msg: Message, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st_struct(msg.struct, msg.context(version), msg.valid)


def random_struct(struct_: Struct, ctx: Any, possible: Any, rng: random.Random) -> dict:
    """Deterministic random values (for the differential tests against Kafka's own tools)."""
    out: dict[str, Any] = {}
    for e in struct_.plan(ctx, possible).fields:
        f = e.f
        if e.nullable and rng.random() < 0.2:
            out[f.key] = None
        elif f.kind == "struct":
            out[f.key] = random_struct(f.struct, ctx, e.possible, rng)
        elif f.kind == "array":
            n = rng.randrange(0, 3)
            if f.struct is not None:
                out[f.key] = [random_struct(f.struct, ctx, e.possible, rng) for _ in range(n)]
            else:
                out[f.key] = [random_scalar(f.elem, rng) for _ in range(n)]
        else:
            out[f.key] = random_scalar(f.kind, rng)
    return out


def random_message(msg: Message, version: int, rng: random.Random) -> dict:
    return random_struct(msg.struct, msg.context(version), msg.valid, rng)


def random_scalar(kind: str, rng: random.Random) -> Any:
    if kind in _RANGES:
        b = _RANGES[kind]
        return rng.choice([0, -1, 1, rng.randrange(-(1 << (b - 1)), 1 << (b - 1))])
    if kind == "uint16":
        return rng.randrange(0, 0x10000)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.choice([0.0, 1.5, 1e10, 123456.25, -2.5e-5])
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kind == "string":
        return rng.choice(["", "a", "topic-1", "grüße", "x" * 20, "tab\there", "q\"uote"])
    if kind == "bytes":
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 6)))
    raise AssertionError(kind)


# ---------------------------------------------------------------------------------------- common


def test_uuid_strings():
    assert uuid_to_kafka_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    # reserved directory ids (DirectoryId.java): UNASSIGNED = 1, LOST = 2
    assert uuid_to_kafka_str(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_to_kafka_str(uuid.UUID(int=2)) == "AAAAAAAAAAAAAAAAAAAAAg"
    u = uuid.UUID("f8f0f2a3-1c5e-4b6e-9f3d-0123456789ab")
    s = uuid_to_kafka_str(u)
    assert len(s) == 22 and "=" not in s and kafka_str_to_uuid(s) == u
    assert kafka_str_to_uuid(s + "==") == u
    assert uuid_to_kafka_str(uuid.UUID(bytes=b"\xff" * 16)) == "_____________________w"
    for bad in ("", "AAAA", "A" * 25, "!!!!!!!!!!!!!!!!!!!!!!"):
        with pytest.raises(ValueError):
            kafka_str_to_uuid(bad)


def test_java_helpers():
    assert java_string_hash("") == 0
    assert java_string_hash("t") == 116
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE, a classic
    assert [java_double_str(d) for d in (0.0, -0.0, 1.0, 100.5, 0.001, 1e-4, 1e7, 9999999.0, 1.2345678e7,
                                         1e21, 5e-324, float("nan"), float("-inf"))] == [
        "0.0", "-0.0", "1.0", "100.5", "0.001", "1.0E-4", "1.0E7", "9999999.0", "1.2345678E7",
        "1.0E21", "4.9E-324", "NaN", "-Infinity"]


def test_jackson_dumps():
    assert jackson_dumps({"a": [1, None, True], "b": "x\"\\\n\x01é", "c": 1.5, "d": {}}) == \
        '{"a":[1,null,true],"b":"x\\"\\\\\\n\\u0001é","c":1.5,"d":{}}'
    assert jackson_dumps({"f": 1e10, "u": U1, "raw": b"\x00\xff"}) == \
        '{"f":1.0E10,"u":"AAAAAAAAAAAAAAAAAAAAAQ","raw":"AP8="}'


# ------------------------------------------------------------------------------- schema engine


SAMPLE = Message("Sample", "0-2", "2+", [
    Field("Id", "int32", "0+"),
    Field("Name", "string", "0+", nullable="1+"),
    Field("Tags", "[]Tag", "1+", fields=[Field("Key", "string", "1+"), Field("Value", "bytes", "1+")]),
    Field("Extra", "int64", "2+", tagged="2+", tag=0, default=-1),
    Field("Maybe", "Inner", "2+", nullable="2+", tagged="2+", tag=1, default=None,
          fields=[Field("X", "int16", "2+")]),
])


def test_schema_non_flexible_and_flexible_layouts():
    data = {"id": 7, "name": "ab", "tags": [{"key": "k", "value": b"\x01"}]}
    assert SAMPLE.write(data, 0) == h("00000007 0002 6162")
    assert SAMPLE.write(data, 1) == h("00000007 0002 6162 00000001 0001 6b 00000001 01")
    # flexible: compact string/array/bytes, struct tag sections, top-level tags; defaults not written
    assert SAMPLE.write(data, 2) == h("00000007 03 6162 02 02 6b 02 01 00 00")
    with_tags = dict(data, extra=5, maybe={"x": 3})
    raw = SAMPLE.write(with_tags, 2)
    assert raw == h("00000007 03 6162 02 02 6b 02 01 00 02 00 08 0000000000000005 01 04 01 0003 00")
    parsed, end = SAMPLE.read(raw, 2)
    assert end == len(raw)
    assert parsed == {"id": 7, "name": "ab", "tags": [{"key": "k", "value": b"\x01"}], "extra": 5,
                      "maybe": {"x": 3}}
    assert SAMPLE.to_json(parsed, 2) == {"id": 7, "name": "ab", "tags": [{"key": "k", "value": "AQ=="}],
                                         "extra": 5, "maybe": {"x": 3}}
    assert SAMPLE.to_json(SAMPLE.read(SAMPLE.write(data, 2), 2)[0], 2) == {
        "id": 7, "name": "ab", "tags": [{"key": "k", "value": "AQ=="}]}


def test_schema_unknown_tags_are_kept_and_rewritten():
    raw = h("00000001 02 61 01 02 00 08 0000000000000009 05 02 abcd")
    parsed, _ = SAMPLE.read(raw, 2)
    assert parsed["extra"] == 9 and parsed["_unknownTaggedFields"] == [(5, b"\xab\xcd")]
    assert SAMPLE.write(parsed, 2) == raw
    assert "_unknownTaggedFields" not in SAMPLE.to_json(parsed, 2)


def test_schema_errors_carry_positions():
    with pytest.raises(CorruptRecordError, match="non-nullable field name was serialized as null") as e:
        SAMPLE.read(h("00000001 ffff"), 0)
    assert e.value.position == 4
    assert SAMPLE.read(h("00000001 ffff 00000000"), 1)[0]["name"] is None
    with pytest.raises(CorruptRecordError, match="Tried to allocate a collection of size 1000"):
        SAMPLE.read(h("00000001 0000 000003e8 00"), 1)
    assert SAMPLE.read(h("00000001 8000 00000000"), 1)[0]["name"] is None  # int16 length -32768 = null
    with pytest.raises(CorruptRecordError, match="string field name had invalid length 32769"):
        SAMPLE.read(h("00000001 828002"), 2)
    with pytest.raises(CorruptRecordError, match="needs 4 byte"):
        SAMPLE.read(h("000000"), 0)
    with pytest.raises(CorruptRecordError, match="Error reading byte array of 7 byte"):
        SAMPLE.read(h("00000001 01 01 01 05 07 00"), 2)  # tag 5 claims 7 bytes, 1 remains
    with pytest.raises(CorruptRecordError, match="Error reading byte array of 5 byte"):
        SAMPLE.read(h("00000001 0000 00000001 0000 00000005 00"), 1)


def test_schema_tag_not_valid_for_version():
    m = ms.METADATA_RECORDS[17]  # BrokerRegistrationChangeRecord: tag 1 (InControlledShutdown) only in v1+
    raw = i32(1) + i64(2) + h("01 01 01 01")
    assert m.read(raw, 1)[0]["inControlledShutdown"] == 1
    with pytest.raises(CorruptRecordError, match="Tag 1 is not valid for version 0"):
        m.read(raw, 0)


@pytest.mark.parametrize(("msg", "version"), MV, ids=MV_IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_spec_round_trips(msg: Message, version: int, data: st.DataObject):
    value = data.draw(st_message(msg, version))
    raw = msg.write(value, version)
    parsed, end = msg.read(raw, version)
    assert end == len(raw)
    assert parsed == value
    assert msg.write(parsed, version) == raw
    jackson_dumps(msg.to_json(parsed, version))  # renders


@pytest.mark.parametrize(("msg", "version"), MV, ids=MV_IDS)
@settings(max_examples=40, deadline=None)
@given(raw=st.binary(max_size=64))
def test_every_spec_random_bytes(msg: Message, version: int, raw: bytes):
    try:
        parsed, _ = msg.read(raw, version)
    except CorruptRecordError:
        return
    jackson_dumps(msg.to_json(parsed, version))


# ------------------------------------------------------------------------------- __consumer_offsets


def offsets_key(record_type: int, fields: dict) -> bytes:
    return i16(record_type) + os_.RECORD_TYPES[record_type].key.write(fields, 0)


def offsets_value(record_type: int, version: int, fields: dict) -> bytes:
    return i16(version) + os_.RECORD_TYPES[record_type].value.write(fields, version)


def test_offset_commit_vectors():
    key = h("0001 0001 67 0001 74 00000000")
    assert offsets_key(1, {"group": "g", "topic": "t", "partition": 0}) == key
    v3 = h("0003 0000000000000064 00000005 0000 00000000000003e8")
    v4 = h("0004 0000000000000064 ffffffff 02 6d 00000000000003e8 00")
    v4_topic_id = h("0004 0000000000000064 ffffffff 02 6d 00000000000003e8 01 00 10") + U1.bytes
    v1 = h("0001 0000000000000064 0000 00000000000003e8 00000000000007d0")
    assert parse_offsets_key(key) == (1, {"group": "g", "topic": "t", "partition": 0})
    assert parse_offsets_value(1, v3) == (3, {"offset": 100, "leaderEpoch": 5, "metadata": "",
                                              "commitTimestamp": 1000})
    assert format_offsets_record(key, v3) == (
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} '
        'payload: {"version":"3","data":{"offset":100,"leaderEpoch":5,"metadata":"","commitTimestamp":1000}}')
    assert format_offsets_record(key, v4).endswith(
        'payload: {"version":"4","data":{"offset":100,"leaderEpoch":-1,"metadata":"m","commitTimestamp":1000}}')
    assert format_offsets_record(key, v4_topic_id).endswith(
        '"commitTimestamp":1000,"topicId":"AAAAAAAAAAAAAAAAAAAAAQ"}}')
    assert decode_offsets_record(key, v1)["payload"] == {
        "version": "1", "data": {"offset": 100, "metadata": "", "commitTimestamp": 1000, "expireTimestamp": 2000}}
    assert offsets_value(1, 3, {"offset": 100, "leaderEpoch": 5, "metadata": "", "commitTimestamp": 1000}) == v3
    assert format_offsets_record(key, None).endswith(" payload: <DELETE>")
    assert decode_offsets_record(key, None)["payload"] is None


# Expected strings from Kafka's DumpLogSegmentsTest.testOffsetsMessageParser (4.0-dev).
SUB = i16(3) + os_.CONSUMER_PROTOCOL_SUBSCRIPTION.write(
    {"topics": ["foo"], "userData": None, "ownedPartitions": [{"topic": "foo", "partitions": [0]}],
     "generationId": 0, "rackId": "rack"}, 3)
ASSIGN = i16(3) + os_.CONSUMER_PROTOCOL_ASSIGNMENT.write(
    {"assignedPartitions": [{"topic": "foo", "partitions": [0]}], "userData": None}, 3)
GROUP_PREFIX = ('{"version":"4","data":{"protocolType":"consumer","generation":10,"protocol":"range",'
                '"leader":"member","currentStateTimestamp":-1,"members":[{"memberId":"member",'
                '"groupInstanceId":"instance","clientId":"client","clientHost":"host",'
                '"rebalanceTimeout":1000,"sessionTimeout":100,')


def group_value(sub: bytes, assign: bytes) -> bytes:
    return offsets_value(2, 4, {
        "protocolType": "consumer", "protocol": "range", "leader": "member", "generation": 10,
        "members": [{"memberId": "member", "clientId": "client", "clientHost": "host",
                     "groupInstanceId": "instance", "sessionTimeout": 100, "rebalanceTimeout": 1000,
                     "subscription": sub, "assignment": assign}]})


def test_dump_log_segments_offsets_parser_vectors():
    cg_key = offsets_key(3, {"groupId": "group"})
    assert cg_key == h("0003 0005") + b"group"
    assert format_offsets_record(cg_key, offsets_value(3, 0, {"epoch": 10})) == (
        'key: {"type":"3","data":{"groupId":"group"}} payload: {"version":"0","data":{"epoch":10}}')
    g_key = offsets_key(2, {"group": "group"})
    assert format_offsets_record(g_key, group_value(SUB, ASSIGN)) == (
        'key: {"type":"2","data":{"group":"group"}} payload: ' + GROUP_PREFIX +
        '"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":[{"topic":"foo","partitions":[0]}],'
        '"generationId":0,"rackId":"rack"},"assignment":{"assignedPartitions":'
        '[{"topic":"foo","partitions":[0]}],"userData":null}}]}}')
    assert format_offsets_record(g_key, group_value(b"Subscription", b"Assignment")) == (
        'key: {"type":"2","data":{"group":"group"}} payload: ' + GROUP_PREFIX +
        '"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}]}}')
    assert format_offsets_record(cg_key, None) == 'key: {"type":"3","data":{"groupId":"group"}} payload: <DELETE>'
    assert format_offsets_record(i16(32767) + cg_key[2:], offsets_value(3, 0, {"epoch": 10})) == (
        "key: Unknown record type 32767 at offset 0, skipping.")
    # a ConsumerGroupMemberMetadataValue (all defaults) under a ConsumerGroupMetadata key
    wrong = i16(0) + os_.CONSUMER_GROUP_MEMBER_METADATA_VALUE.write({}, 0)
    assert wrong == h("0000 01 01 01 01 01 01 ffffffff 01 00")
    assert format_offsets_record(cg_key, wrong, offset=0) == (
        "key: Error at offset 0, skipping. Could not read record with version 0 from value's buffer due to: "
        "Error reading byte array of 536870911 byte(s): only 1 byte(s) available.")
    with pytest.raises(CorruptRecordError, match="missing key"):
        format_offsets_record(None, None)


def test_consumer_group_records():
    member = {"instanceId": None, "rackId": "r1", "clientId": "c", "clientHost": "/10.0.0.1",
              "subscribedTopicNames": ["a", "b"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 30000,
              "serverAssignor": "uniform", "classicMemberMetadata": None}
    raw = offsets_value(5, 0, member)
    # the JSON default of ClassicMemberMetadata is null = the empty struct, so a null is written explicitly
    assert raw.endswith(h("01 00 01 00"))
    rec = decode_offsets_record(offsets_key(5, {"groupId": "g", "memberId": "m"}), raw)
    assert rec["key"] == {"type": "5", "data": {"groupId": "g", "memberId": "m"}}
    assert rec["payload"]["data"]["classicMemberMetadata"] is None
    absent = offsets_value(5, 0, dict(member, classicMemberMetadata={"sessionTimeoutMs": 0,
                                                                      "supportedProtocols": []}))
    assert absent.endswith(b"uniform\x00") and "classicMemberMetadata" not in \
        decode_offsets_record(offsets_key(5, {"groupId": "g", "memberId": "m"}), absent)["payload"]["data"]
    assign = {"memberEpoch": 3, "previousMemberEpoch": 2, "state": 0,
              "assignedPartitions": [{"topicId": U1, "partitions": [0, 2]}], "partitionsPendingRevocation": []}
    j = decode_offsets_record(offsets_key(8, {"groupId": "g", "memberId": "m"}),
                              offsets_value(8, 0, assign))["payload"]["data"]
    assert j["assignedPartitions"] == [{"topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": [0, 2]}]
    regex_key = offsets_key(16, {"groupId": "g", "regularExpression": "foo.*"})
    assert decode_offsets_record(regex_key, offsets_value(16, 0, {"topics": ["foo1"], "version": 4,
                                                                 "timestamp": 5}))["payload"] == {
        "version": "0", "data": {"topics": ["foo1"], "version": 4, "timestamp": 5}}


def test_share_group_older_layouts():
    key = offsets_key(11, {"groupId": "s"})
    old = i16(0) + os_.SHARE_GROUP_METADATA_VALUE_4_0.write({"epoch": 4}, 0)
    new = i16(0) + os_.SHARE_GROUP_METADATA_VALUE.write({"epoch": 4, "metadataHash": 99}, 0)
    assert decode_offsets_record(key, old)["payload"]["data"] == {"epoch": 4}
    assert decode_offsets_record(key, new)["payload"]["data"] == {"epoch": 4, "metadataHash": 99}


def test_offsets_unknown_type_and_short_key():
    rec = decode_offsets_record(h("0063 0001 61"), b"\x00\x00")
    assert rec == {"key": {"type": "99", "data": None, "unknownRecordType": True}, "payload": {"raw": "AAA="}}
    assert format_offsets_record(b"\x00", None, offset=7) == (
        "key: Error at offset 7, skipping. Could not read version from key's buffer.")
    assert decode_consumer_subscription(SUB)["rackId"] == "rack"


@settings(max_examples=300, deadline=None)
@given(record_type=st.sampled_from([*os_.RECORD_TYPES, 18, 99, -1]), body=st.binary(max_size=40),
       value=st.one_of(st.none(), st.binary(max_size=80)))
def test_offsets_fuzz(record_type: int, body: bytes, value: bytes | None):
    for key in (i16(record_type) + body, body):
        try:
            decode_offsets_record(key, value)
        except CorruptRecordError:
            pass
        format_offsets_record(key, value, offset=3)


@pytest.mark.parametrize("record_type", sorted(os_.RECORD_TYPES))
@settings(max_examples=30, deadline=None)
@given(value=st.binary(max_size=80), version=st.integers(-2, 6))
def test_offsets_value_fuzz_per_type(record_type: int, value: bytes, version: int):
    try:
        decode_offsets_record(i16(record_type) + b"\x00\x01a\x00\x01b\x00\x00\x00\x00", i16(version) + value)
    except CorruptRecordError:
        pass


# ------------------------------------------------------------------------------ __transaction_state


TXN_V1 = h("0001 00000000000003e8 0002 0000ea60 01 02 02 74 03 00000000 00000001 00"
           "0000000000000005 0000000000000004 02 01 08 0000000000000007 02 02 0002")


def test_transaction_vectors():
    key = h("0000 0002 7478")
    assert ts.TRANSACTION_LOG_KEY.write({"transactionalId": "tx"}, 0) == key[2:]
    fields = {"producerId": 1000, "producerEpoch": 2, "transactionTimeoutMs": 60000, "transactionStatus": 1,
              "transactionPartitions": [{"topic": "t", "partitionIds": [0, 1]}],
              "transactionLastUpdateTimestampMs": 5, "transactionStartTimestampMs": 4,
              "nextProducerId": 7, "clientTransactionVersion": 2}
    assert i16(1) + ts.TRANSACTION_LOG_VALUE.write(fields, 1) == TXN_V1
    rec = decode_transaction_record(key, TXN_V1)
    assert rec["key"] == {"type": "0", "data": {"transactionalId": "tx"}}
    assert (rec["payload"]["version"], rec["payload"]["state"]) == ("1", "Ongoing")
    assert rec["payload"]["data"] == {
        "producerId": 1000, "nextProducerId": 7, "producerEpoch": 2, "transactionTimeoutMs": 60000,
        "transactionStatus": 1, "transactionPartitions": [{"topic": "t", "partitionIds": [0, 1]}],
        "transactionLastUpdateTimestampMs": 5, "transactionStartTimestampMs": 4, "clientTransactionVersion": 2}
    assert format_transaction_record(key, TXN_V1) == (
        'key: {"type":"0","data":{"transactionalId":"tx"}} payload: {"version":"1","data":{"producerId":1000,'
        '"nextProducerId":7,"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":1,'
        '"transactionPartitions":[{"topic":"t","partitionIds":[0,1]}],"transactionLastUpdateTimestampMs":5,'
        '"transactionStartTimestampMs":4,"clientTransactionVersion":2}}')
    # Kafka 3.9's text; t-1 hashes to bucket 4, t-0 to bucket 5 of the Scala HashSet
    assert format_transaction_record(key, TXN_V1, dialect="3.9") == (
        "key: transaction_metadata::transactionalId=tx payload: producerId:1000,producerEpoch:2,state=Ongoing,"
        "partitions=[t-1,t-0],txnLastUpdateTimestamp=5,txnTimeoutMs=60000")
    v0 = i16(0) + ts.TRANSACTION_LOG_VALUE.write(dict(fields, transactionStatus=0, transactionPartitions=None), 0)
    assert format_transaction_record(key, v0, dialect="3.9").endswith("state=Empty,partitions=[],txnLastUpdateTimestamp=5,"
                                                       "txnTimeoutMs=60000")
    assert format_transaction_record(key, None, dialect="3.9") == (
        "key: transaction_metadata::transactionalId=tx payload: <DELETE>")
    assert format_transaction_record(key, None) == 'key: {"type":"0","data":{"transactionalId":"tx"}} payload: <DELETE>'
    assert format_transaction_record(h("0001 0002 7478"), TXN_V1, dialect="3.9") == "key: unknown::version=1"
    assert format_transaction_record(h("0001 0002 7478"), TXN_V1, 4) == "key: Unknown record type 1 at offset 4, skipping."
    assert format_transaction_record(key, h("0002") + TXN_V1[2:], 9) == (
        "key: Error at offset 9, skipping. Found an unknown record version 2 for 0 type")
    with pytest.raises(CorruptRecordError, match="Unknown version 2"):
        format_transaction_record(key, h("0002") + TXN_V1[2:], dialect="3.9")
    bad_state = i16(0) + ts.TRANSACTION_LOG_VALUE.write(dict(fields, transactionStatus=9), 0)
    with pytest.raises(CorruptRecordError, match="Unknown transaction state id 9"):
        format_transaction_record(key, bad_state, dialect="3.9")
    assert '"transactionStatus":9' in format_transaction_record(key, bad_state)


def test_scala_hashset_order():
    assert ts.scala_hashset_order([]) == []
    assert ts.scala_hashset_order([[("t", 0), ("t", 1), ("t", 0)]]) == [("t", 1), ("t", 0)]
    many = [[("topic", p) for p in range(40)], [("other", 3)]]
    order = ts.scala_hashset_order(many)
    assert sorted(order) == sorted({tp for g in many for tp in g})


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=20), value=st.one_of(st.none(), st.binary(max_size=80)))
def test_transaction_fuzz(key: bytes, value: bytes | None):
    for fn in (decode_transaction_record, format_transaction_record,
               lambda k, v: format_transaction_record(k, v, dialect="3.9")):
        try:
            fn(b"\x00\x00" + key, value)
        except CorruptRecordError:
            pass


# ------------------------------------------------------------------------------ __cluster_metadata

TOPIC_FOO = h("01 02 00 04 666f6f") + U1.bytes + h("00")
CONFIG_FOO = h("01 04 00 02 04 666f6f 0d") + b"retention.ms" + h("05") + b"1000" + h("00")


def metadata(api_key: int, version: int, fields: dict) -> bytes:
    return encode_metadata_record(api_key, fields, version)  # checked against Kafka's bytes by the vectors below


def test_metadata_vectors():
    assert metadata(2, 0, {"name": "foo", "topicId": U1}) == TOPIC_FOO
    assert decode_metadata_record(TOPIC_FOO) == {
        "type": "TOPIC_RECORD", "version": 0, "data": {"name": "foo", "topicId": "AAAAAAAAAAAAAAAAAAAAAQ"}}
    assert format_metadata_record(TOPIC_FOO) == (
        'payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"foo","topicId":"AAAAAAAAAAAAAAAAAAAAAQ"}}')
    assert metadata(4, 0, {"resourceType": 2, "resourceName": "foo", "name": "retention.ms",
                           "value": "1000"}) == CONFIG_FOO
    pcr = h("01 05 00 00000000") + U1.bytes + h("01 01 04 00000003")
    assert decode_metadata_record(pcr)["data"] == {"partitionId": 0, "topicId": "AAAAAAAAAAAAAAAAAAAAAQ",
                                                   "leader": 3}
    rec = parse_metadata_record(pcr)
    assert (rec.api_key, rec.name, rec.data["isr"], rec.data["leader"]) == (5, "PartitionChangeRecord", None, 3)
    assert decode_metadata_record(h("01 0c 00 11") + b"metadata.version" + h("0016 00")) == {
        "type": "FEATURE_LEVEL_RECORD", "version": 0, "data": {"name": "metadata.version", "featureLevel": 22}}
    assert decode_metadata_record(h("01 14 00 00")) == {"type": "NO_OP_RECORD", "version": 0, "data": {}}
    quota = metadata(14, 0, {"entity": [{"entityType": "user", "entityName": None}], "key": "producer_byte_rate",
                             "value": 1024.0, "remove": False})
    assert format_metadata_record(quota).endswith('"key":"producer_byte_rate","value":1024.0,"remove":false}}')


def test_metadata_type_names():
    names = {ms.METADATA_RECORDS[k].name: decode_metadata_record(metadata(k, 0, {}))["type"]
             for k in ms.METADATA_RECORDS}
    assert names["ZkMigrationStateRecord"] == "ZK_MIGRATION_STATE_RECORD"
    assert names["RegisterBrokerRecord"] == "REGISTER_BROKER_RECORD"
    assert names["AccessControlEntryRecord"] == "ACCESS_CONTROL_ENTRY_RECORD"
    assert names["UserScramCredentialRecord"] == "USER_SCRAM_CREDENTIAL_RECORD"
    assert len(names) == 26


def test_metadata_errors_like_metadata_record_serde_test():
    def err(raw: bytes) -> str:
        return format_metadata_record(raw, offset=12).removeprefix("payload: Error at 12, skipping. ")

    assert err(h("0f")).startswith("Could not deserialize metadata record due to unknown frame version 15")
    assert err(h("808080808080")).startswith("Error while reading frame version")
    assert err(h("01 808080808080")).startswith("Error while reading type")
    assert err(h("01 08 8080808080")).startswith("Error while reading version")
    assert err(h("01 08 ffffff7f 80")).startswith("Value for version was too large")
    assert err(h("01 ff7f 00 80")) == ("org.apache.kafka.common.errors.UnsupportedVersionException: "
                                       "Unknown metadata id 16383")
    assert err(h("01 00 00 80")) == "Failed to deserialize record with type 0"
    assert err(TOPIC_FOO + b"\x00") == "Found 1 byte(s) of garbage after 2"
    assert err(h("00 02 00")).startswith("Could not deserialize metadata record with frame version 0.")
    assert format_metadata_record(None, 1) == "payload: Error at 1, skipping. null"
    assert decode_metadata_record(h("01 ff7f 00 80")) == {
        "type": "UnknownRecord", "apiKey": 16383, "version": 0, "data": "gA=="}
    assert decode_metadata_record(b"\x00" + TOPIC_FOO[1:])["type"] == "TOPIC_RECORD"  # 2.8 frame accepted


class _Rec:
    def __init__(self, value: bytes | None):
        self.value = value


def test_topic_configs_replay():
    u2 = uuid.UUID(int=2)
    recs = [
        TOPIC_FOO,
        CONFIG_FOO,
        metadata(4, 0, {"resourceType": 2, "resourceName": "foo", "name": "cleanup.policy", "value": "compact"}),
        metadata(2, 0, {"name": "bar", "topicId": u2}),
        metadata(3, 0, {"partitionId": 0, "topicId": u2, "replicas": [1], "isr": [1], "leader": 1}),
        metadata(4, 0, {"resourceType": 4, "resourceName": "", "name": "log.retention.ms", "value": "5"}),
        metadata(4, 0, {"resourceType": 2, "resourceName": "foo", "name": "retention.ms", "value": None}),
        None,
        _Rec(metadata(4, 0, {"resourceType": 2, "resourceName": "bar", "name": "segment.bytes",
                             "value": "1024"})),
        _Rec(None),
    ]
    assert topic_configs(recs) == {"foo": {"cleanup.policy": "compact"}, "bar": {"segment.bytes": "1024"}}
    assert topic_ids(recs) == {"foo": "AAAAAAAAAAAAAAAAAAAAAQ", "bar": "AAAAAAAAAAAAAAAAAAAAAg"}
    state = MetadataState().replay_all(recs + [metadata(9, 0, {"topicId": U1})])
    assert state.topic_configs() == {"bar": {"segment.bytes": "1024"}}
    assert state.broker_configs() == {"": {"log.retention.ms": "5"}}
    # recreated with the same name: new id, old configs gone
    state.replay(metadata(2, 0, {"name": "foo", "topicId": uuid.UUID(int=3)}))
    assert state.topic_configs()["foo"] == {} and state.topic_ids["foo"] == "AAAAAAAAAAAAAAAAAAAAAw"
    bad = TOPIC_FOO[:-3]
    with pytest.raises(CorruptRecordError):
        topic_ids([bad])
    lenient = MetadataState(strict=False).replay_all([bad, TOPIC_FOO, h("01 0c 00 ff")])
    assert lenient.errors == 1 and lenient.topic_ids == {"foo": "AAAAAAAAAAAAAAAAAAAAAQ"}


@settings(max_examples=500, deadline=None)
@given(value=st.binary(max_size=80))
def test_metadata_fuzz(value: bytes):
    for raw in (value, b"\x01" + value[:1] + b"\x00" + value[1:]):
        try:
            decode_metadata_record(raw)
        except CorruptRecordError:
            pass
        assert format_metadata_record(raw, 5).startswith("payload: ")
        MetadataState(strict=False).replay(raw)


@pytest.mark.parametrize("api_key", sorted(ms.METADATA_RECORDS))
@settings(max_examples=40, deadline=None)
@given(body=st.binary(max_size=60), version=st.integers(0, 5))
def test_metadata_fuzz_per_type(api_key: int, body: bytes, version: int):
    try:
        decode_metadata_record(bytes([1, api_key, version]) + body)
    except CorruptRecordError:
        pass


def test_mutated_valid_payloads_only_raise_corrupt_record_error():
    rng = random.Random(1234)
    for msg, version in MV:
        raw = msg.write(random_message(msg, version, rng), version)
        for _ in range(30):
            b = bytearray(raw)
            op = rng.randrange(3)
            if op == 0 and b:
                b[rng.randrange(len(b))] = rng.randrange(256)
            elif op == 1:
                b = b[:rng.randrange(len(b) + 1)]
            else:
                b.insert(rng.randrange(len(b) + 1), rng.choice([0x00, 0x7F, 0x80, 0xFF]))
            try:
                parsed, _ = msg.read(bytes(b), version)
                jackson_dumps(msg.to_json(parsed, version))
            except CorruptRecordError:
                pass


# ----------------------------------------------------------------------------------- control records


def test_control_records():
    header = h("0000 0003"), h("0000 00000000000004d2 00")
    assert format_control_record(*header) == 'SnapshotHeader {"version":0,"lastContainedLogTimestamp":1234}'
    assert decode_control_record(*header) == {"type": "SNAPSHOT_HEADER", "typeId": 3,
                                              "data": {"version": 0, "lastContainedLogTimestamp": 1234}}
    assert format_control_record(h("0000 0004"), h("0000 00")) == 'SnapshotFooter {"version":0}'
    assert format_control_record(h("0000 0005"), h("0000 0001 00")) == 'KRaftVersion {"version":0,"kRaftVersion":1}'
    voters = kc.VOTERS_RECORD.write({"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": U1, "endpoints": [{"name": "CONTROLLER", "host": "localhost",
                                                             "port": 9093}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]}, 0)
    assert format_control_record(h("0000 0006"), voters) == (
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAQ",'
        '"endpoints":[{"name":"CONTROLLER","host":"localhost","port":9093}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}')
    leader = kc.LEADER_CHANGE_MESSAGE.write({"version": 0, "leaderId": 1, "voters": [{"voterId": 1}],
                                             "grantingVoters": [{"voterId": 1}]}, 0)
    assert leader == h("0000 00000001 02 00000001 00 02 00000001 00 00")
    assert format_control_record(h("0000 0002"), leader, dialect="3.9") == "controlType: LEADER_CHANGE(2)"
    assert format_control_record(h("0000 0002"), leader) == (
        'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}')
    leader_v1 = kc.LEADER_CHANGE_MESSAGE.write({"version": 1, "leaderId": 1, "voters": [{"voterId": 1}],
                                                "grantingVoters": []}, 0)
    assert format_control_record(h("0000 0002"), leader_v1) == (  # read at 0, JSON at 1 (Kafka 4.3.1's output)
        'LeaderChange: {"version":1,"leaderId":1,"voters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA"}],'
        '"grantingVoters":[]}')
    assert decode_control_record(h("0000 0002"), leader)["data"] == {
        "version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]}
    assert format_control_record(h("0000 0001"), h("0000 00000005")) == "endTxnMarker: COMMIT coordinatorEpoch: 5"
    assert format_control_record(h("0001 0000 ff"), h("0003 00000005 99")) == \
        "endTxnMarker: ABORT coordinatorEpoch: 5"
    assert format_control_record(h("0000 0009"), None) == "controlType: UNKNOWN(9)"
    assert decode_control_record(h("0000 0009"), b"")["data"] is None
    with pytest.raises(CorruptRecordError, match="at least 4 bytes, but found only 3"):
        format_control_record(h("000000"), None)
    with pytest.raises(CorruptRecordError, match="Invalid version found for control record: -1"):
        decode_control_record(h("ffff 0001"), h("0000 00000005"))
    with pytest.raises(CorruptRecordError, match="end transaction marker. Must have at least 6 bytes"):
        decode_control_record(h("0000 0001"), h("0000"))


@settings(max_examples=300, deadline=None)
@given(type_id=st.integers(0, 7), value=st.one_of(st.none(), st.binary(max_size=60)))
def test_control_fuzz(type_id: int, value: bytes | None):
    for fn in (decode_control_record, format_control_record,
               lambda k, v: format_control_record(k, v, dialect="3.9")):
        try:
            fn(i16(0) + i16(type_id), value)
        except CorruptRecordError:
            pass
