"""The `--parse --json` encoder (issue 23 item 8: msgspec's, for speed) prints exactly the
record contract the standard library's did: same objects, same key order, UTF-8 text
(never \\u escapes), one object per line. Speed: benchmarks/logs_json_bench.py."""

from __future__ import annotations

import json

from console.cli.logs import json_lines_encoder
from server_control.logs import parse_text

LINES = [
    "[2026-11-29 10:00:05 TP0] Decode batch, #running-req: 7, #token: 900, token usage: 0.12, accept len: 2.80, "
    "accept rate: 0.45, cuda graph: True, gen throughput (token/s): 512.30, #queue-req: 2",
    "[2026-11-29 10:00:06 TP0] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)",
    "[2026-11-29 10:00:07] modèle chargé \u2713 \u00e9t\u00e9",
]


def test_same_records_as_the_standard_library(monkeypatch):
    records = [r.to_json() for r in parse_text("\n".join(LINES) + "\n")]
    fast = json_lines_encoder()(records)
    monkeypatch.setenv("SPECCONSOLE_JSON", "std")
    std = json_lines_encoder()(records)
    assert fast.endswith(b"\n") and fast.count(b"\n") == len(records)
    for a, b in zip(fast.decode().splitlines(), std.decode().splitlines(), strict=True):
        assert json.loads(a) == json.loads(b) and list(json.loads(a)) == list(json.loads(b))
    assert "\u2713".encode() in fast and b"\\u" not in fast
