"""KRaft ``quorum-state`` of ``__cluster_metadata-0`` (``raft/.../FileQuorumStateStore.java``,
``QuorumStateData.json``).

One line of JSON, read with ``BufferedReader.readLine`` and Jackson: an object with ``data_version`` 0 or 1
and the fields of that version (every field of the version is mandatory in the generated JSON converter;
unknown fields are ignored)::

    v0: {"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,
         "currentVoters":[{"voterId":1}],"data_version":0}
    v1: {"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ",
         "data_version":1}

The broker refuses to start when the file does not parse (``UncheckedIOException``/``IllegalStateException``
from ``QuorumState.initialize``). It is written through ``quorum-state.tmp`` and an atomic move.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from kafkalog.storage.errors import CorruptCheckpointError, KafkaLogError
from kafkalog.storage.files.findings import Defect, defect
from kafkalog.storage.files.java import uuid_from_string
from kafkalog.storage.io.jsonio import loads
from kafkalog.storage.io.local import read_bounded

QUORUM_STATE_FILE = "quorum-state"
MAX_BYTES = 1 << 20
NOT_VOTED = -1
UNKNOWN_LEADER_ID = -1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

_V0 = ("clusterId", "leaderId", "leaderEpoch", "votedId", "appliedOffset", "currentVoters")
_V1 = ("leaderId", "leaderEpoch", "votedId", "votedDirectoryId")


@dataclass
class QuorumState:
    data_version: int
    leader_id: int = UNKNOWN_LEADER_ID
    leader_epoch: int = -1
    voted_id: int = NOT_VOTED
    voted_directory_id: str | None = None  # v1
    cluster_id: str | None = None  # v0
    applied_offset: int | None = None  # v0
    current_voters: list[int] | None = field(default=None)  # v0 (None: JSON null)
    path: str | None = None

    @property
    def has_leader(self) -> bool:
        return self.leader_id != UNKNOWN_LEADER_ID

    @property
    def has_voted(self) -> bool:
        return self.voted_id != NOT_VOTED

    def to_dict(self) -> dict:
        d: dict = {"dataVersion": self.data_version, "leaderId": self.leader_id, "leaderEpoch": self.leader_epoch,
                   "votedId": self.voted_id}
        if self.data_version == 0:
            d.update(clusterId=self.cluster_id, appliedOffset=self.applied_offset, currentVoters=self.current_voters)
        else:
            d["votedDirectoryId"] = self.voted_directory_id
        return d

    @classmethod
    def from_bytes(cls, data: bytes, path: str | os.PathLike | None = None) -> QuorumState:
        p = None if path is None else str(path)

        def bad(reason: str, pos: int | None = None) -> CorruptCheckpointError:
            return CorruptCheckpointError(reason + " (the broker does not start with this quorum-state)", p, pos)

        data = bytes(data)
        end = len(data)
        for sep in (b"\n", b"\r"):  # BufferedReader.readLine: the first line, ended by \n, \r or \r\n
            i = data.find(sep)
            if i >= 0:
                end = min(end, i)
        if not data:
            raise bad("empty file: expected one line of JSON")
        try:
            line = data[:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise bad(f"invalid UTF-8 ({e.reason})", e.start) from None
        try:
            obj = loads(line)
        except json.JSONDecodeError as e:
            raise bad(f"not JSON: {e.msg}", len(line[:e.pos].encode("utf-8"))) from None
        except ValueError as e:  # nested too deeply
            raise bad(f"not JSON: {e}", 0) from None
        if not isinstance(obj, dict):
            raise bad(f"expected a JSON object, found {type(obj).__name__}", 0)
        if "data_version" not in obj:
            raise bad("no data_version field", 0)
        version = obj["data_version"]
        if not _is_int(version) or not 0 <= version <= 1:
            raise bad(f"data_version {version!r} is not within the supported versions 0 and 1", 0)
        for name in (_V0 if version == 0 else _V1):
            if name not in obj:
                raise bad(f"field {name!r} is mandatory in version {version}", 0)

        def int_field(name: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
            v = obj[name]
            if not _is_int(v) or not lo <= v <= hi:
                raise bad(f"field {name!r} is {v!r}, not a {'32' if hi == INT32_MAX else '64'}-bit integer", 0)
            return v

        st = cls(version, int_field("leaderId"), int_field("leaderEpoch"), int_field("votedId"), path=p)
        if version == 0:
            if not isinstance(obj["clusterId"], str):
                raise bad(f"field 'clusterId' is {obj['clusterId']!r}, not a string", 0)
            st.cluster_id = obj["clusterId"]
            st.applied_offset = int_field("appliedOffset", INT64_MIN, INT64_MAX)
            voters = obj["currentVoters"]
            if voters is not None:
                if not isinstance(voters, list) or not all(isinstance(v, dict) and "voterId" in v for v in voters):
                    raise bad("field 'currentVoters' is not a list of {\"voterId\": N} objects", 0)
                st.current_voters = []
                for v in voters:
                    if not _is_int(v["voterId"]) or not INT32_MIN <= v["voterId"] <= INT32_MAX:
                        raise bad(f"voterId {v['voterId']!r} is not a 32-bit integer", 0)
                    st.current_voters.append(v["voterId"])
        else:
            d = obj["votedDirectoryId"]
            try:
                if not isinstance(d, str):
                    raise ValueError
                uuid_from_string(d)
            except (ValueError, KafkaLogError):
                raise bad(f"field 'votedDirectoryId' is {d!r}, not a Uuid", 0) from None
            st.voted_directory_id = d
        return st

    def fatal_problems(self) -> list[Defect]:
        """What of :meth:`validate` stops the broker at startup (``ElectionState.fromQuorumStateData`` fails on a
        null ``currentVoters`` with a NullPointerException)."""
        if self.data_version == 0 and self.current_voters is None:
            return [defect("quorumState.nullVoters")]
        return []

    def validate(self, log_end_epoch: int | None = None) -> list[Defect]:
        """What ``QuorumState.initialize`` would object to or change (the file itself parsed): first the
        :meth:`fatal_problems`, then the warnings (below the log's last epoch, the broker starts unattached at it)."""
        out = self.fatal_problems()
        if self.leader_epoch < 0 and (self.has_leader or self.has_voted):
            out.append(defect("quorumState.negativeEpoch", leaderEpoch=self.leader_epoch))
        if log_end_epoch is not None and self.leader_epoch < log_end_epoch:
            out.append(defect("quorumState.epochBelowLog", leaderEpoch=self.leader_epoch, logEndEpoch=log_end_epoch))
        return out


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def read_quorum_state(path: str | os.PathLike) -> QuorumState:
    return QuorumState.from_bytes(read_bounded(path, MAX_BYTES, CorruptCheckpointError), path)
