"""Text checkpoint files, partition.metadata, meta.properties, .kafka_cleanshutdown and the atomic write."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog import facts
from kafkalog.storage.errors import CorruptCheckpointError
from kafkalog.storage.files import (
    CleanShutdownMarker,
    EpochEntry,
    LeaderEpochCheckpoint,
    MetaProperties,
    OffsetCheckpoint,
    PartitionMetadata,
    TopicPartitionOffset,
    read_clean_shutdown,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    write_clean_shutdown,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)
from kafkalog.storage.files.checkpoints import leftover_tmp
from kafkalog.storage.io.fileops import atomic_write, fsync_dir, tmp_path


def _words(defects) -> list[str]:
    """What a file's checks found, in the words the commands print (kafkalog.facts)."""
    return [facts.render(d.finding("f", "checkpoint", "warning")) for d in defects]

# ---------------------------------------------------------------------------------------- offset checkpoints


def test_offset_checkpoint_parse_and_round_trip():
    data = b"0\n3\norders 0 5127\n__consumer_offsets 49 0\nmy.topic-with-dash 12 9223372036854775807\n"
    c = OffsetCheckpoint.from_bytes(data)
    assert c.entries == [
        TopicPartitionOffset("orders", 0, 5127),
        TopicPartitionOffset("__consumer_offsets", 49, 0),
        TopicPartitionOffset("my.topic-with-dash", 12, 9223372036854775807),
    ]
    assert c.canonical and c.to_bytes() == data
    assert c.to_dict()[("orders", 0)] == 5127
    assert c.validate() == []


@pytest.mark.parametrize(
    "data,form,count",
    [
        (b"", "empty", 0),  # zero-length: valid, "no entries"
        (b"0\n", "version-only", 0),
        (b"0\n0\n", "full", 0),
        (b"0\r\n1\r\nt 0 1\r\n", "full", 1),  # Windows line separator
    ],
)
def test_offset_checkpoint_degenerate_forms_round_trip(data, form, count):
    c = OffsetCheckpoint.from_bytes(data)
    assert c.form == form and len(c.entries) == count
    assert c.to_bytes() == data


def test_offset_checkpoint_reader_is_lenient_like_java():
    # BufferedReader.readLine accepts a lone \r, split("\\s+") drops trailing empty fields, no final newline
    c = OffsetCheckpoint.from_bytes(b"0\r2\rt\t0   7 \nu 1 +8")
    assert [(e.topic, e.partition, e.offset) for e in c.entries] == [("t", 0, 7), ("u", 1, 8)]
    assert not c.canonical
    assert c.validate()  # non-canonical is reported


@pytest.mark.parametrize(
    "data,line",
    [
        (b"1\n0\n", 1),  # unrecognised version
        (b" 0\n0\n", 1),  # Integer.parseInt rejects whitespace
        (b"0\nx\n", 2),
        (b"0\n-1\n", 2),
        (b"0\n2\nt 0 1\n", 2),  # count mismatch
        (b"0\n1\n t 0 1\n", 3),  # a leading space makes 4 fields
        (b"0\n1\n\n", 3),  # an empty line
        (b"0\n1\nt 0\n", 3),
        (b"0\n1\nt x 1\n", 3),
        (b"0\n1\nt 0 99999999999999999999\n", 3),  # long overflow
        (b"0\n1\nt 2147483648 1\n", 3),  # int overflow
        (b"0\n1\nt\xff 0 1\n", 3),  # invalid UTF-8
    ],
)
def test_offset_checkpoint_garbage_gives_line_number(data, line, tmp_path):
    p = tmp_path / "recovery-point-offset-checkpoint"
    p.write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as ei:
        read_offset_checkpoint(p)
    assert ei.value.line == line
    assert ei.value.path == str(p)
    assert f"line {line}" in str(ei.value)
    assert ei.value.position is not None and 0 <= ei.value.position <= len(data)


def test_offset_checkpoint_duplicates_and_negative_reported():
    c = OffsetCheckpoint.from_bytes(b"0\n3\nt 0 1\nt 0 2\nt 1 -5\n")
    assert c.to_dict()[("t", 0)] == 2  # later wins, as Kafka's map
    problems = c.validate()
    assert [(d.code, dict(d.facts)) for d in problems] == [
        ("checkpoint.duplicate", {"topic": "t", "partition": 0}),
        ("checkpoint.negativeOffset", {"offset": -5, "topic": "t", "partition": 1})]
    assert _words(problems) == ["duplicate entry for t-0", "negative offset -5 for t-1"]


def test_offset_checkpoint_write_atomic_and_tmp_never_read(tmp_path):
    p = tmp_path / "replication-offset-checkpoint"
    write_offset_checkpoint(p, {("a", 0): 10, ("b", 3): 0})
    assert p.read_bytes() == b"0\n2\na 0 10\nb 3 0\n"
    assert not tmp_path.joinpath("replication-offset-checkpoint.tmp").exists()
    # a crash leftover: reported, never read instead of the real file
    tmp_path.joinpath("replication-offset-checkpoint.tmp").write_bytes(b"garbage")
    assert leftover_tmp(p) == tmp_path / "replication-offset-checkpoint.tmp"
    assert read_offset_checkpoint(p).to_dict() == {("a", 0): 10, ("b", 3): 0}
    with pytest.raises(ValueError):
        write_offset_checkpoint(p, {("bad topic", 0): 1})


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_offset_checkpoint_hostile_bytes(data):
    try:
        c = OffsetCheckpoint.from_bytes(data, "f")
    except CorruptCheckpointError as e:
        assert e.path == "f" and e.position is not None
    else:
        c.validate()
        if c.canonical:
            assert c.to_bytes() == data


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[a-zA-Z0-9._-]{1,30}", fullmatch=True),
            st.integers(0, 2**31 - 1),
            st.integers(-(2**63), 2**63 - 1),
        ),
        max_size=20,
    ),
    st.sampled_from(["\n", "\r\n"]),
)
def test_offset_checkpoint_round_trip_property(entries, nl):
    c = OffsetCheckpoint([TopicPartitionOffset(*e) for e in entries], newline=nl)
    data = c.to_bytes()
    back = OffsetCheckpoint.from_bytes(data)
    assert back.entries == c.entries and back.canonical and back.to_bytes() == data


def test_huge_count_is_not_allocated():
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpoint.from_bytes(b"0\n2147483647\nt 0 1\n")


# ---------------------------------------------------------------------------------------- leader epochs


def test_leader_epoch_checkpoint(tmp_path):
    data = b"0\n3\n0 0\n2 1500\n5 98311\n"
    c = LeaderEpochCheckpoint.from_bytes(data)
    assert c.entries == [EpochEntry(0, 0), EpochEntry(2, 1500), EpochEntry(5, 98311)]
    assert c.to_bytes() == data and c.validate() == []
    assert c.epoch_for_offset(1499) == 0 and c.epoch_for_offset(1500) == 2 and c.epoch_for_offset(10**9) == 5
    p = tmp_path / "leader-epoch-checkpoint"
    write_leader_epoch_checkpoint(p, c.entries)
    assert p.read_bytes() == data
    assert read_leader_epoch_checkpoint(p).entries == c.entries
    p.write_bytes(b"")
    assert read_leader_epoch_checkpoint(p).entries == [] and read_leader_epoch_checkpoint(p).to_bytes() == b""


def test_leader_epoch_checkpoint_bad():
    with pytest.raises(CorruptCheckpointError) as ei:
        LeaderEpochCheckpoint.from_bytes(b"0\n1\n0 0 0\n")
    assert ei.value.line == 3
    c = LeaderEpochCheckpoint.from_bytes(b"0\n3\n2 10\n1 20\n-1 5\n")
    problems = c.validate()
    assert [d.code for d in problems] == ["epochCheckpoint.notIncreasing", "epochCheckpoint.negative",
                                          "epochCheckpoint.notIncreasing"]
    assert _words(problems) == ["entry 1 20 does not increase after 2 10",
                                "invalid entry -1 5: negative epoch or start offset",
                                "entry -1 5 does not increase after 1 20"]


# ---------------------------------------------------------------------------------------- partition.metadata


def test_partition_metadata_exact_bytes(tmp_path):
    data = b"version: 0\ntopic_id: l5y0MjLvQdypLcP9XmR7bw"
    m = PartitionMetadata.from_bytes(data)
    assert m.topic_id == "l5y0MjLvQdypLcP9XmR7bw" and m.version == 0
    assert len(m.topic_id_bytes) == 16
    assert m.to_bytes() == data and m.canonical
    assert PartitionMetadata.from_uuid_bytes(m.topic_id_bytes).topic_id == m.topic_id
    p = tmp_path / "partition.metadata"
    write_partition_metadata(p, m.topic_id)
    assert p.read_bytes() == data
    assert read_partition_metadata(p).topic_id == m.topic_id


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"version: 0",
        b"version 0\ntopic_id: l5y0MjLvQdypLcP9XmR7bw",
        b"version: x\ntopic_id: l5y0MjLvQdypLcP9XmR7bw",
        b"version: -1\ntopic_id: l5y0MjLvQdypLcP9XmR7bw",
        b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",  # the zero uuid is rejected
        b"version: 0\ntopic_id: short",
        b"version: 0\ntopic_id: l5y0MjLvQdypLcP9XmR7bw+AAAAAAAAAAAA",  # too long
        b"version: 0\ntopic_id: l5y0MjLvQdypLcP9XmR7b!",
        b"version: 0\ntopic_id: \xff",
    ],
)
def test_partition_metadata_rejects(data):
    with pytest.raises(CorruptCheckpointError):
        PartitionMetadata.from_bytes(data, "partition.metadata")


def test_partition_metadata_accepts_higher_version_and_trailing_newline():
    m = PartitionMetadata.from_bytes(b"version: 1\ntopic_id: l5y0MjLvQdypLcP9XmR7bw\n")
    assert m.version == 1 and not m.canonical


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_partition_metadata_hostile(data):
    try:
        PartitionMetadata.from_bytes(data)
    except CorruptCheckpointError:
        pass


# ---------------------------------------------------------------------------------------- meta.properties

KRAFT_JDK17 = (
    b"#\n#Fri Oct 25 03:33:01 UTC 2024\nnode.id=1\ndirectory.id=pKnJ0cAhRMqJ0g3Tt0Vv0A\nversion=1\n"
    b"cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n"
)
ZK_JDK8 = b"#\n#Tue Mar 05 10:00:00 UTC 2019\ncluster.id=abc\nversion=0\nbroker.id=0\n"


def test_meta_properties_kraft_round_trip():
    m = MetaProperties.from_bytes(KRAFT_JDK17)
    assert m.version == 1 and m.node_id == 1 and m.cluster_id == "MkU3OEVBNTcwNTJENDM2Qg"
    assert m.directory_id == "pKnJ0cAhRMqJ0g3Tt0Vv0A"
    assert m.keys() == ["node.id", "directory.id", "version", "cluster.id"]
    assert m.date_comment == "Fri Oct 25 03:33:01 UTC 2024"
    assert m.to_bytes() == KRAFT_JDK17 and m.validate() == []


def test_meta_properties_zk_round_trip_and_edit(tmp_path):
    m = MetaProperties.from_bytes(ZK_JDK8)
    assert m.version == 0 and m.node_id == 0 and m.keys() == ["cluster.id", "version", "broker.id"]
    assert m.to_bytes() == ZK_JDK8
    m.set("directory.id", "pKnJ0cAhRMqJ0g3Tt0Vv0A")
    p = tmp_path / "meta.properties"
    write_meta_properties(p, m)
    assert p.read_bytes() == ZK_JDK8 + b"directory.id=pKnJ0cAhRMqJ0g3Tt0Vv0A\n"
    assert read_meta_properties(p).directory_id == "pKnJ0cAhRMqJ0g3Tt0Vv0A"


def test_meta_properties_new_in_jdk_orders():
    m = MetaProperties.new(version=1, cluster_id="c", node_id=3, directory_id="pKnJ0cAhRMqJ0g3Tt0Vv0A", now=0)
    assert m.to_bytes() == (
        b"#\n#Thu Jan 01 00:00:00 UTC 1970\nnode.id=3\ndirectory.id=pKnJ0cAhRMqJ0g3Tt0Vv0A\nversion=1\ncluster.id=c\n"
    )
    assert MetaProperties.new(version=0, cluster_id="c", node_id=3, key_order="jdk8", now=0).keys() == [
        "cluster.id",
        "version",
        "broker.id",
    ]
    assert MetaProperties.new(version=1, cluster_id="c", node_id=3, key_order="sorted", now=0).keys() == [
        "cluster.id",
        "node.id",
        "version",
    ]


def test_meta_properties_java_properties_syntax():
    data = (
        b"! bang comment\n  # indented comment\n\nkey1 = a\\\n    b\nkey2:c\\:d\nkey3 e\n"
        b"\\ spaced\\=key=\\ v\\tx\\u0041\nversion=1\nnode.id=7\ncluster.id=x"
    )
    m = MetaProperties.from_bytes(data)
    props = m.properties()
    assert props["key1"] == "ab" and props["key2"] == "c:d" and props["key3"] == "e"
    assert props[" spaced=key"] == " v\txA"
    assert m.node_id == 7
    # rendering normalises entries the way Properties.store writes them; comments kept verbatim
    assert m.to_bytes().startswith(b"! bang comment\n  # indented comment\n\nkey1=ab\n")
    assert b"\\ spaced\\=key=\\ v\\txA\n" in m.to_bytes()


@pytest.mark.parametrize(
    "data,lines,newline",
    [
        (b"a\\\\\\\n   b\n", [("a\\b", "")], "\n"),  # odd run of backslashes: one continues, the pair escapes
        (b"k=v\\\n\nx=y\n", [("k", "v"), ("x", "y")], "\n"),  # continued into a blank line: it ends there
        (b"k\\\n\\\n\\\\\n=1\n", [("k\\", ""), ("", "1")], "\n"),  # backslashes counted across joined lines
        (b"k \t = \t v = w\r\nz\\", [("k", "v = w"), ("z", "")], "\r\n"),  # whitespace, one separator, whitespace
        (b"\\=\\:\\ k:v\rnext=\\u00e9\\u4e2d", [("=: k", "v"), ("next", "\u00e9\u4e2d")], "\r"),
        (b"k=\\\n  \\\n  tail\n", [("k", "tail")], "\n"),
        (b"  #c\\\nk=v\n", ["  #c\\", ("k", "v")], "\n"),  # a comment is never continued
        (b"a:b\\\r\n c", [("a", "bc")], "\r\n"),
    ],
)
def test_meta_properties_lines_continuations_and_escapes(data, lines, newline):
    """``Properties.load``'s line rules on the cases that joined lines and escapes make hard."""
    m = MetaProperties.from_bytes(data)
    assert m.lines == lines and m.newline == newline
    assert MetaProperties.from_bytes(m.to_bytes()).lines == lines


@pytest.mark.parametrize(
    "data,problem",
    [
        (b"version=2\n", "unknown meta.properties version"),
        (b"version=1\ncluster.id=c\n", "without node.id"),
        (b"version=1\nnode.id=1\n", "without cluster.id"),
        (b"version=0\nbroker.id=x\n", "invalid broker.id"),
        (b"version=0\ndirectory.id=nope\n", "Uuid"),
        (b"version=0\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n", "reserved"),
    ],
)
def test_meta_properties_validation(data, problem):
    problems = MetaProperties.from_bytes(data).validate()
    assert all(d.code.startswith("metaProperties.") for d in problems)
    assert any(problem in p for p in _words(problems)), problems


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_meta_properties_hostile(data):
    try:
        m = MetaProperties.from_bytes(data)
        m.validate()
        m.to_bytes()
    except CorruptCheckpointError:
        pass


# ---------------------------------------------------------------------------------------- clean shutdown


def test_clean_shutdown_forms(tmp_path):
    p = tmp_path / ".kafka_cleanshutdown"
    assert read_clean_shutdown(p) is None  # absent: unclean
    p.write_bytes(b"")
    m = read_clean_shutdown(p)
    assert m is not None and m.broker_epoch is None and m.to_bytes() == b"" and m.validate() == []
    p.write_bytes(b'{"version":0,"brokerEpoch":42}')
    m = read_clean_shutdown(p)
    assert m.broker_epoch == 42 and m.version == 0 and m.is_json
    assert m.to_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert CleanShutdownMarker.with_epoch(-1).to_bytes() == b'{"version":0,"brokerEpoch":-1}'
    p.write_bytes(b"garbage")
    m = read_clean_shutdown(p)
    assert m.broker_epoch is None and m.to_bytes() == b"garbage"
    assert _words(m.validate()) == ["content is neither empty nor Kafka's JSON form; Kafka reads it as 'no broker "
                                    "epoch'"]
    write_clean_shutdown(p, CleanShutdownMarker.with_epoch(7))
    assert p.read_bytes() == b'{"version":0,"brokerEpoch":7}'


# ---------------------------------------------------------------------------------------- atomic write


def test_atomic_write_replaces_and_cleans_up(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"old")
    atomic_write(p, b"new")
    assert p.read_bytes() == b"new" and not tmp_path.joinpath("f.tmp").exists()
    assert tmp_path_of(p) == tmp_path / "f.tmp"
    fsync_dir(tmp_path)
    # failure while writing: the target is untouched and the tmp file removed
    with pytest.raises(TypeError):
        atomic_write(p, object())  # type: ignore[arg-type]
    assert p.read_bytes() == b"new" and not tmp_path.joinpath("f.tmp").exists()


def tmp_path_of(p: os.PathLike) -> os.PathLike:
    return tmp_path(p)


@pytest.mark.parametrize("text", [
    b"<#666\\u66666666*",  # found by atheris (tests/fuzz: meta-properties): UnicodeEncodeError in to_bytes
    b"cluster.id=\\u00e9t\\u00E9-\\uD83D\\uDE00\n",
    b"k\\u0100y=v\\uFFFF\n",
])
def test_meta_properties_unicode_escapes_write_back(text):
    """A \\uXXXX escape past latin-1 is read as that character and written back as an escape (as
    Properties.store(OutputStream) writes it), so to_bytes never fails and re-reads to the same lines."""
    m = MetaProperties.from_bytes(text)
    out = m.to_bytes()
    again = MetaProperties.from_bytes(out)
    assert again.lines == m.lines
    assert again.to_bytes() == out
