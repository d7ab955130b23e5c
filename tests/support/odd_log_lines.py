"""Odd log lines that the fast JSON ways must take or leave (tests/logs/test_json_lines.py,
tests/logs/test_native_json.py): SGLang 0.5.23's stats shapes and their near misses, the
kinds without fields under SGLang's prefix, and lines of other shapes."""

from __future__ import annotations

from server_control.logs import Record, parse_text

P = "[2026-11-29 10:00:05 TP0] "
DEC = (
    "Decode batch, #running-req: 7, #token: 900, token usage: 0.10, accept len: 2.80, accept rate: 0.45, "
    "cuda graph: True, gen throughput (token/s): 512.30, #queue-req: 2"
)
PRE = "Prefill batch, #new-seq: 4, #new-token: 407, #cached-token: 1811, token usage: 0.05, #running-req: 3, #queue-req: 1, "
RANKS_60 = " ".join(f"TP{i}" for i in range(60))

# (line, the fast way must take it)
ODD: list[tuple[str, bool]] = [
    # SGLang 0.5.23's own stats shapes: every variant of rank / accept / graph, milliseconds
    (P + DEC, True),
    (P + DEC.replace("True", "False"), True),
    (
        "[2026-11-29 10:00:05.123 DP1 TP3] Decode batch, #running-req: 0, #token: 0, token usage: 0.00, "
        "cuda graph: False, gen throughput (token/s): 0.00, #queue-req: 0, ",
        True,
    ),
    ("[2026-11-29 10:00:05] " + DEC, True),
    (
        "[2026-11-29 10:00:05] Decode batch. #running-req: 1, #full token: 5, full token usage: 1.5, cpu graph: True, "
        "gen throughput (token/s): 10.0, #queue-req: 0",
        True,
    ),
    ("[2026-11-29 10:00:05 ATTN_TP0 EP1] " + DEC, True),
    (P + PRE, True),
    ("[2026-11-29 10:00:05.5] " + PRE.rstrip(", "), True),
    # other releases' and options' stats shapes, key by key (unknown keys skipped, a later key
    # over an earlier, any order)
    (P + DEC + ', extra: "quoted\\"', True),  # an unknown key's value, escaped in the text
    ("[2026-11-29 10:00:05 DP0 TP3 EP3] Decode batch [896581], " + DEC.partition(", ")[2], True),
    (P + DEC + ", est. decode TFLOPS/s (per GPU): 12.34, est. read BW (GB/s per GPU): 1234.56, fwd occupancy: 87.65%", True),
    (
        P + "Decode batch, #running-req: 5, #full token: 5323, full token usage: 0.51, mamba num: 23, mamba usage: 0.09, "
        "pre-allocated usage: 0.98, #prealloc-req: 7, #transfer-req: 2, #retracted-req: 0, npu graph: False, "
        "gen throughput (token/s): 80.30, #queue-req: 1, ",
        True,
    ),
    (P + "Decode batch. #queue-req: 3, #running-req: 9, #running-req: 10, cap len: 03.5, token usage: 0.5", True),
    (P + "Decode batch.  #running-req: 9", True),  # the key after ". ", stripped
    ("[10:00:05] Decode batch, #running-req: 2, #queue-req: 0", True),  # the clock alone
    (
        P + "Prefill batch, #new-seq: 1, #new-token: 5120, #cached-token: 3132, token usage: 0.61, #running-req: 5, "
        "#queue-req: 0, #pending-token: 1485, cuda graph: False, input throughput (token/s): 79193.29",
        True,
    ),
    (
        P + "Prefill batch(mixed #running-req: 3). #new-seq: 1, #new-token: 9, #cached-token: 0, "
        "cache hit rate: 0.00%, #running-req: 3, #queue-req: 0",
        True,
    ),
    # stats lines that are not the known shape: the Record way
    (P + DEC.replace("#running-req: 7", "#running-req: 07"), False),  # leading zero: not a JSON number
    (P + PRE.replace("#new-seq: 4", "#new-seq: 04"), False),
    (P + DEC.replace("#running-req: 7", "#running-req: 1\u0663"), False),  # Arabic-Indic digit: int() reads it
    (P + DEC.replace("#token: 900", "#token: 12345678901234567890"), False),  # 20 digits
    (P + DEC + ", cuda graph: yes", False),  # a known key's value that is not clean
    (P + DEC.replace("#running-req: 7", "#running-req: 1.5"), False),  # an int key's float
    (P + DEC.replace("token usage: 0.10", "token usage: nan"), False),  # not a JSON number
    (P + DEC.replace("token usage: 0.10", "token usage: 1e3"), False),
    (P + DEC.replace("#queue-req: 2", "#queue-req: 2 ,"), False),  # "2 " after rstrip(",")
    (P + DEC + ", #queue-req:  5\t", False),  # a tab: str.strip() would strip it
    (P + PRE + "input throughput (token/s): 1e9", False),
    ("wrapper: " + P + DEC, False),
    (f"[2026-11-29 10:00:05 {RANKS_60}] " + DEC, False),  # the prefix runs past the 240-column window
    ("[2026-11-29 10:00:05,123 TP0] " + DEC, False),
    # kinds without fields, SGLang's prefix: the fast way, escaped
    ('[2026-11-29 10:00:05] INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK', True),
    (P + 'WARNING: a "quoted" back\\slash \\" and a\ttab', True),
    (P + "ERROR: control \x01 \x1b[31m \r chars, DEL \x7f", True),
    (P + "plain ünïcode line é — 漢字 \ufffd (invalid UTF-8 read)", True),
    (P + "The server is fired up and ready to roll!", True),
    ("[10:00:05 TP0 EP0] no date, only the clock", True),
    ("[2026-11-29T10:00:05.123456789 DP3 TP3]no space after the bracket", True),
    ("[2026-11-29 10:00:05]", True),  # no message
    (P + "x" * 5000, True),  # a very long line
    (f"[2026-11-29 10:00:05 {RANKS_60}] too many ranks", False),
    ("[2026-11-29 10:00:05,123 TP0] a comma in the clock", False),
    ("[gpu_id=0] another release's prefix", False),
    ("INFO 11-29 10:00:00 [x.py:12] a vLLM-style prefix", False),
    ("/usr/lib/python3/torch/cuda/__init__.py:61: FutureWarning: no prefix at all", False),
    ("", False),
    ("plain line without any prefix \u00e9", False),
    # kinds with fields of their own, and tracebacks: the Record way
    ("[2026-11-29 10:00:06 TP0] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)", False),
    ('[2026-11-29 10:00:08 TP0] Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom', False),
]


def odd_records() -> list[Record]:
    recs = parse_text("\n".join(line for line, _ in ODD) + "\n")
    assert len(recs) == len(ODD), "one record per odd line (the traceback grouped)"
    return recs
