"""``kafkalog groups``: the offline ``kafka-consumer-groups.sh --describe --all-groups``; a thin shell over
:func:`kafkalog.storage.reports.groups.load_groups`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO

from kafkalog import facts
from kafkalog.storage.reports.groups import GroupsReport, load_groups

from .output import JsonLines, add_epoch_argument, positive_int, progress, render_table, time_format

DESCRIPTION = """\
Consumer groups and their committed offsets, read from the __consumer_offsets partitions of Kafka data
dirs without a broker: the offline `kafka-consumer-groups.sh --describe --all-groups`.

  kafkalog groups /var/lib/kafka/data                  # groups, then offsets and lag per partition
  kafkalog groups /data1 /data2 --group orders-app     # one group (give every log.dirs of the broker)
  kafkalog groups /var/lib/kafka/data --members        # like --describe --members
  kafkalog groups /var/lib/kafka/data --state          # like --describe --state
  kafkalog groups --json /var/lib/kafka/data | jq 'select(.lag > 0)'   # see --json below

The __consumer_offsets records are replayed as the group coordinator loads them: the latest record per key
wins, tombstones delete offset commits and groups (deleted groups and deleted offsets are gone),
transactional offset commits count once their transaction committed (COMMIT marker), classic groups
(GroupMetadata) and consumer groups (KIP-848 records) alike. A loaded classic group is Empty without
members and Stable with members (the members the broker last persisted: after a restart they must
rejoin); a consumer group's state is computed as the broker does (Empty, Assigning, Reconciling, Stable).

LOG-END-OFFSET is what kafka-consumer-groups.sh shows under that name, the partition's high watermark:
here the replication-offset-checkpoint entry capped at the log end offset, or the log end offset
when the partition has no entry (--json: logEndOffsetSource). LAG = LOG-END-OFFSET - CURRENT-OFFSET.
"-" when the partition is not in the given dirs (pass every log dir of the broker), or no member has it.

--json prints one object per group: groupId, type (classic, consumer, share, streams), state,
protocolType, protocol, generation (classic generation or group epoch), leader, assignmentEpoch,
stateTimestamp, coordinatorPartition, dataDir, members [{memberId, groupInstanceId, clientId, host,
memberEpoch, memberState, subscribedTopics, rackId, assignment [{topic, partition}]}], offsets
[{topic, partition, topicId, committedOffset, leaderEpoch, metadata, commitTimestamp, expireTimestamp,
recordOffset, logEndOffset, logEndOffsetSource, lag, consumerId, host, clientId}] and
pendingTransactionalOffsets (schema: docs/schemas/group.schema.json).

Exit codes: 0 ok, 1 a __consumer_offsets partition could not be read to its end (the groups are shown as
read up to the damage) or --group names no group, 2 usage error."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="LOG_DIR",
                        help="data dirs of one broker (or __consumer_offsets partition dirs)")
    parser.add_argument("--group", metavar="G", help="only this group")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="one line per member (like --describe --members)")
    view.add_argument("--state", action="store_true", help="one line per group (like --describe --state)")
    view.add_argument("--offsets", action="store_true", help="only the offsets table (like --describe)")
    parser.add_argument("--json", action="store_true", help="print JSON Lines, one object per group")
    parser.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="__consumer_offsets partitions replayed by N processes at once (the same result; "
                        "default: the number of CPUs from 64 MiB of them on, else 1)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_epoch_argument(parser)


def run(args: argparse.Namespace) -> int:
    with progress(None, "groups", enabled=False if args.no_progress else None) as bar:
        report = load_groups(args.paths, group=args.group, progress=bar, workers=args.workers)
    if args.json:
        out = JsonLines(sys.stdout)
        for g in report.groups:
            out.write(g.to_json())
    else:
        print_report(report, sys.stdout, members=args.members, state=args.state, offsets_only=args.offsets,
                     epoch=args.epoch)
    sys.stdout.flush()
    for n in report.notes:
        print(f"kafkalog groups: note: {facts.render(n)}", file=sys.stderr)
    for r in report.beyond_end:
        print(f"kafkalog groups: note: group {r.group} committed offset {r.offset} in {Path(r.file).name}, past its "
              f"log end offset {r.log_end_offset}: offsets {r.first_missing}..{r.last_missing} are no longer in the "
              "log (the lag shown is negative)", file=sys.stderr)
    for e in report.errors:
        print(f"kafkalog groups: error: {facts.render(e)}", file=sys.stderr)
    if not report.partitions:
        print("kafkalog groups: no __consumer_offsets partition in these dirs (is this the group coordinator's "
              "broker? give all its log dirs)", file=sys.stderr)
    if args.group is not None and not report.groups:
        print(f"kafkalog groups: consumer group '{args.group}' does not exist.", file=sys.stderr)
        return 1
    return 1 if report.errors else 0


GROUP_COLUMNS = ["group", "type", "state", "protocolType", "protocol", "generation", "members", "offsets",
                 "partition", "stateTimestamp"]
GROUP_HEADERS = ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "ASSIGNMENT-STRATEGY", "GENERATION", "#MEMBERS",
                 "#OFFSETS", "COORDINATOR-PARTITION", "STATE-TIME"]
DESCRIBE_COLUMNS = ["group", "topic", "partition", "currentOffset", "logEndOffset", "lag", "consumerId", "host",
                    "clientId"]
DESCRIBE_HEADERS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                    "HOST", "CLIENT-ID"]


def print_report(report: GroupsReport, stream: IO[str], *, members: bool = False, state: bool = False,
                 offsets_only: bool = False, epoch: bool = False) -> None:
    """The human views: groups then offsets (default), ``members``, ``state`` or ``offsets_only``."""
    if members:
        rows = [{"group": g.group_id, "consumerId": m.member_id, "groupInstanceId": m.group_instance_id,
                 "host": m.client_host, "clientId": m.client_id, "partitions": len(m.assignment),
                 "assignment": ", ".join(f"{t}-{p}" for t, p in sorted(m.assignment)) or None}
                for g in report.groups for m in g.members.values()]
        render_table(rows, ["group", "consumerId", "groupInstanceId", "host", "clientId", "partitions",
                            "assignment"], stream,
                     headers=["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                              "ASSIGNMENT"])
        return
    groups = [{"group": g.group_id, "type": g.type, "state": g.state, "protocolType": g.protocol_type,
               "protocol": g.protocol, "generation": g.generation, "members": len(g.members),
               "offsets": len(g.offsets), "partition": g.coordinator_partition,
               "stateTimestamp": g.state_timestamp} for g in report.groups]
    if state:
        render_table(groups, ["group", "partition", "protocol", "state", "members"], stream,
                     headers=["GROUP", "COORDINATOR-PARTITION", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"])
        return
    if not offsets_only:
        render_table(groups, GROUP_COLUMNS, stream, headers=GROUP_HEADERS,
                     formats={"stateTimestamp": time_format(epoch)})
        stream.write("\n")
    render_table(report.describe_rows(), DESCRIBE_COLUMNS, stream, headers=DESCRIBE_HEADERS)
