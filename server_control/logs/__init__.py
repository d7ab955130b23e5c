"""Logs: follow a file (tail -F), parse SGLang lines into records, keep them in a bounded store.

    from server_control.logs import LogPipeline, LogStore
    store = LogStore()                       # 100k records by default
    pipeline = LogPipeline(path, store, on_records=lambda last_seq: ...)
    task = asyncio.create_task(pipeline.run())
    new = store.since(seen)                  # Record objects, oldest first

Imports protocol and sanitize only.
"""

from server_control.logs.parse import Parser, classify, parse_bytes, parse_text
from server_control.logs.pattern import compile_pattern
from server_control.logs.pipeline import LogPipeline, iter_file
from server_control.logs.record import DISPLAY_CAP, JSON_KEYS, KINDS, Record
from server_control.logs.store import LogStore
from server_control.logs.tail import Follower

__all__ = [
    "DISPLAY_CAP",
    "JSON_KEYS",
    "KINDS",
    "Follower",
    "LogPipeline",
    "LogStore",
    "Parser",
    "Record",
    "classify",
    "compile_pattern",
    "iter_file",
    "parse_bytes",
    "parse_text",
]
