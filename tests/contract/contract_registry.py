"""The registry of the contract matrix (issue 34): how to run every ``kafkalog`` command on a path.

A command joins the matrix by being registered here: ``test_matrix.test_every_command_is_registered`` fails when
``kafkalog.tools.cli.COMMANDS`` has a command that is neither in :data:`REGISTRY` nor in :data:`EXEMPT` (with
the reason). Each :class:`Invocation` is an argv template:

* ``{path}``: the argument under test: a path case (``missing``, ``file``, ``empty``, ``not_kafka``,
  ``parent``), or in a damage cell the damaged data dir (``target="data"``) or its damaged partition dir
  (``target="victim"``);
* ``{out}``: the command's designated output (``export --out``, ``migrate``'s new destination): the only path
  outside a data dir a command may write;
* ``{inputs}``: the inputs made once per session (``append.jsonl``, ``export.jsonl``), read-only;
* ``{pristine}``: the undamaged fixture data dir (read-only); ``{store}``: the tiered fixture's remote store.

``role``: ``input`` (the path must be a data dir or a partition dir, or a file for commands that read files),
``destination`` (a data dir the command writes partitions into: a new one is allowed, a path that does not exist
yet or an empty dir, as the command documents), ``store`` (``remote``'s LocalTieredStorage store: its own rules,
the same exit class and no writes).
"""

from __future__ import annotations

from dataclasses import dataclass

from damage import LOSING

NOW = "1900000000000"
CLUSTER_ID = "Aw5EClUXSoGxHhT0nCIykw"

#: the path cases: what every command gets when its path argument is not Kafka's
PATH_CASES = ("missing", "file", "empty", "not_kafka", "parent")


@dataclass(frozen=True)
class Invocation:
    command: str  # the key of kafkalog.tools.cli.COMMANDS
    argv: tuple[str, ...]
    mutating: bool = False
    #: the damages whose lost records it reads (a reader): exiting 0 over one of them is a silent loss
    reads: tuple[str, ...] = ()
    role: str = "input"
    #: what {path} is in damage cells: the data dir, or the damaged partition dir; None: no damage cells
    target: str | None = "data"
    #: the path cases this invocation runs (all unless a reason limits them, see ``note``)
    cases: tuple[str, ...] = PATH_CASES
    #: a mutating command whose job is to remove records (its plan reports each removal)
    removes: bool = False
    note: str = ""


REGISTRY: dict[str, Invocation] = {
    "dump": Invocation("dump", ("dump", "--deep", "{path}"), reads=LOSING, target="victim",
                       cases=("missing", "empty", "not_kafka", "parent"),
                       note="dump reads files: a file is its input (what it does with one it does not know is "
                            "its own rule), so the file case does not apply"),
    "verify": Invocation("verify", ("verify", "--workers", "1", "{path}"), reads=LOSING,
                         cases=("missing", "empty", "not_kafka", "parent"),
                         note="verify reads single files too: an unknown file is an info finding, not a path case"),
    "describe": Invocation("describe", ("describe", "{path}"), reads=("torn_middle",),
                           note="a description: it reads each segment's batch headers (a torn one is an error) but "
                                "checks no CRC, and a partition without .log files shows END 0 beside RECOVERY and "
                                "HW 150; verify and doctor judge the damage"),
    "append": Invocation("append", ("append", "{path}", "codec-none-0", "--from", "{inputs}/append.jsonl"),
                         mutating=True, role="destination",
                         note="append creates a partition it does not find, in an empty dir too (a new data dir, "
                              "as import: tests/storage/test_append.py); a dir that is not Kafka's is refused"),
    "flush": Invocation("flush", ("flush", "--no-backup", "{path}"), mutating=True),
    "repair": Invocation("repair", ("repair", "--no-backup", "{path}"), mutating=True, removes=True),
    "doctor": Invocation("doctor", ("doctor", "{path}"), reads=LOSING),
    "reindex": Invocation("reindex", ("reindex", "--all", "--no-backup", "{path}"), mutating=True),
    "retain": Invocation("retain", ("retain", "--now", NOW, "--no-backup", "{path}"), mutating=True, removes=True),
    "compact": Invocation("compact", ("compact", "--all", "--now", NOW, "--no-backup", "{path}"), mutating=True,
                          removes=True),
    "convert": Invocation("convert", ("convert", "--codec", "zstd", "--no-backup", "{path}"), mutating=True),
    "migrate": Invocation("migrate", ("migrate", "{path}", "{out}", "--cluster-id", CLUSTER_ID, "--node-id", "1",
                                      "--no-backup"), mutating=True, target="victim"),
    "migrate DEST": Invocation("migrate", ("migrate", "{pristine}/codec-none-0", "{path}", "--cluster-id",
                                           CLUSTER_ID, "--node-id", "1", "--no-backup"),
                               mutating=True, role="destination"),
    "topic-id": Invocation("topic-id", ("topic-id", "{path}")),
    "topic-id --set": Invocation("topic-id", ("topic-id", "--set", "random", "--topics", "codec-none",
                                              "--no-backup", "{path}"), mutating=True),
    "checkpoints": Invocation("checkpoints", ("checkpoints", "{path}")),
    "checkpoints --set": Invocation("checkpoints", ("checkpoints", "{path}", "--file", "recovery-point", "--set",
                                                    "codec-none-0=0", "--no-backup"), mutating=True),
    "export": Invocation("export", ("export", "{path}", "--out", "{out}"), reads=LOSING),
    "sql": Invocation("sql", ("sql", "{path}", "SELECT count(*), sum(octet_length(value)) FROM records"), reads=LOSING),
    "import": Invocation("import", ("import", "{inputs}/export.jsonl", "{path}", "--topic", "imported"),
                         mutating=True, role="destination"),
    "groups": Invocation("groups", ("groups", "{path}"),
                         note="it reads __consumer_offsets (one segment per partition in the fixture: no middle "
                              "segment to tear; tests/storage/test_loss_never_silent.py tears one); a committed "
                              "offset past the log end of the partition that lost its .log files is a note with exit "
                              "0, as that test asserts"),
    "transactions": Invocation("transactions", ("transactions", "{path}"),
                               note="it reads producer state and __transaction_state, which the damages of "
                                    "multi-segment-0 do not touch (tests/storage/test_loss_never_silent.py tears "
                                    "what it reads)"),
    "diff": Invocation("diff", ("diff", "{path}", "{pristine}"), reads=LOSING,
                       cases=("missing", "empty", "not_kafka", "parent"),
                       note="diff compares .log files too: a file against a dir is its own usage rule"),
    "remote": Invocation("remote", ("remote", "ls", "{path}"), role="store", target=None,
                         note="its argument is a tiered-storage store, not a data dir: the damages of a data dir "
                              "do not apply (tests/storage/test_remote.py damages stores)"),
    "rehydrate": Invocation("rehydrate", ("rehydrate", "{store}", "{path}", "--no-backup"), mutating=True,
                            role="destination"),
    "spark": Invocation("spark", ("spark", "verify", "{path}"), cases=("missing",), target=None,
                        note="every other cell starts a Spark JVM (10-20 s each on this machine: the matrix would "
                             "take minutes more than its budget); the Spark jobs' damaged-dir behaviour is "
                             "tests/spark's (test_verify, test_export), which run one JVM for many cases"),
}

#: commands with no path argument, and why they are not in the matrix
EXEMPT = {
    "conformance": "its scenarios take no data dir (they run a real broker in their own work dir: tests/kafka, "
                   "-m kafka); `conformance certify DIR` checks its input itself (compat/certify.check_input) and "
                   "starts a broker for anything past it",
    "completion": "takes no path: it prints a shell completion script",
}
