"""The options of a command that applies a broker's time-based rules with the topic configs (``compact``,
``retain``): the time it runs at and the config sources, in Kafka's precedence, that the resolver reads."""

from __future__ import annotations

import argparse
import time

from kafkalog.storage.config.resolver import ConfigResolver
from kafkalog.tools.output import NOW_GRAMMAR, timestamp_ms


def add_config_arguments(p: argparse.ArgumentParser, now: str) -> None:
    """``--now`` (``now``: what the time is, e.g. "cleaning time") and the config sources."""
    p.add_argument("--now", type=timestamp_ms, default=None, metavar="TIME",
                   help=f"{now}: {NOW_GRAMMAR} (default: wall clock)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config override")
    p.add_argument("--topic-config", metavar="FILE", help="properties file of topic configs")
    p.add_argument("--server-properties", metavar="FILE", help="the broker's server.properties")


def now_ms(args: argparse.Namespace) -> int:
    """``--now``, or the wall clock, in epoch milliseconds."""
    return args.now if args.now is not None else int(time.time() * 1000)


def config_resolver(args: argparse.Namespace) -> ConfigResolver:
    """The resolver over the config sources of ``args`` and the data dirs in ``args.dirs``."""
    return ConfigResolver(args.server_properties, args.topic_config, args.config, data_dirs=args.dirs)
