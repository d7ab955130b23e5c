"""Real-world SGLang log lines (2024 .. 0.5.23, plus our patch's wording) and what the
parser must make of each: (line, expected subset of the record's JSON)."""

D = "decode"
P = "prefill"

SAMPLES = [
    # --- decode stats, current format (0.5.x), TP prefix, speculation fields, trailing comma
    (
        "[2026-11-29 10:00:00 TP0] Decode batch, #running-req: 8, #token: 1234, token usage: 0.01, "
        "accept len: 2.85, accept rate: 0.46, cuda graph: True, gen throughput (token/s): 512.33, #queue-req: 0, ",
        dict(
            kind=D,
            ts="2026-11-29T10:00:00",
            rank="TP0",
            running_req=8,
            num_tokens=1234,
            token_usage=0.01,
            accept_len=2.85,
            accept_rate=0.46,
            cuda_graph=True,
            gen_throughput=512.33,
            queue_req=0,
            new_seq=None,
            threshold=None,
            mode=None,
            batch=None,
        ),
    ),
    # --- 2024: period after "batch", no speculation fields, no cuda graph, no trailing comma
    (
        "[2024-07-17 21:35:47 TP0] Decode batch. #running-req: 1, #token: 20, token usage: 0.00, "
        "gen throughput (token/s): 5.13, #queue-req: 0",
        dict(
            kind=D,
            ts="2024-07-17T21:35:47",
            rank="TP0",
            running_req=1,
            num_tokens=20,
            token_usage=0.0,
            gen_throughput=5.13,
            queue_req=0,
            accept_len=None,
            cuda_graph=None,
        ),
    ),
    # --- tp == 1: no rank tag; milliseconds (SGLANG_LOG_MS)
    (
        "[2026-11-29 10:00:00.123] Decode batch, #running-req: 3, #token: 300, token usage: 0.10, "
        "cuda graph: False, gen throughput (token/s): 90.00, #queue-req: 2, ",
        dict(kind=D, ts="2026-11-29T10:00:00.123", rank=None, running_req=3, cuda_graph=False, queue_req=2),
    ),
    # --- time-only stamp
    (
        "[10:00:00 TP0] Decode batch. #running-req: 2, #token: 10, token usage: 0.00, "
        "gen throughput (token/s): 1.50, #queue-req: 0",
        dict(kind=D, ts="10:00:00", rank="TP0", running_req=2, gen_throughput=1.5),
    ),
    # --- [gpu_id=0] prefix (early 2024)
    (
        "[gpu_id=0] Decode batch. #running-req: 1, #token: 20, token usage: 0.00, gen throughput (token/s): 5.13, #queue-req: 0",
        dict(kind=D, ts=None, rank="gpu_id=0", running_req=1, num_tokens=20),
    ),
    # --- DP + TP prefix
    (
        "[2026-11-29 10:00:00 DP3 TP3] Decode batch, #running-req: 5, #token: 500, token usage: 0.05, "
        "accept len: 3.00, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 1, ",
        dict(kind=D, rank="DP3 TP3", running_req=5, accept_len=3.0),
    ),
    # --- TP + EP prefix
    (
        "[2026-11-29 10:00:00 TP0 EP0] Decode batch, #running-req: 6, #token: 600, token usage: 0.06, "
        "cuda graph: True, gen throughput (token/s): 310.00, #queue-req: 0, ",
        dict(kind=D, rank="TP0 EP0", running_req=6),
    ),
    # --- PP + TP prefix
    (
        "[2026-11-29 10:00:00 PP1 TP2] Decode batch, #running-req: 4, #token: 40, token usage: 0.01, "
        "cuda graph: True, gen throughput (token/s): 40.00, #queue-req: 0, ",
        dict(kind=D, rank="PP1 TP2", running_req=4),
    ),
    # --- hybrid SWA model: token_usage takes the full-attention value, #full token -> num_tokens
    (
        "[2026-11-29 10:00:00 TP0] Decode batch, #running-req: 4, #full token: 1051, full token usage: 0.20, "
        "#swa token: 300, swa token usage: 0.70, cuda graph: True, gen throughput (token/s): 453.12, #queue-req: 0, ",
        dict(kind=D, token_usage=0.2, num_tokens=1051, running_req=4),
    ),
    # --- hybrid mamba (GDN) model on CPU: cpu graph
    (
        "[2026-08-14 08:17:30] Decode batch, #running-req: 4, #full token: 1051, full token usage: 0.20, "
        "mamba num: 16, mamba usage: 0.90, cpu graph: False, gen throughput (token/s): 453.12, #queue-req: 0",
        dict(kind=D, token_usage=0.2, cuda_graph=False, gen_throughput=453.12),
    ),
    # --- NPU build
    (
        "[2026-11-29 10:00:00 TP1] Decode batch, #running-req: 2, #token: 5, token usage: 0.00, npu graph: True, "
        "gen throughput (token/s): 1.00, #queue-req: 3,",
        dict(kind=D, cuda_graph=True, queue_req=3, rank="TP1"),
    ),
    # --- forward-iteration counter (SGLANG_LOG_FORWARD_ITERS)
    (
        "[2026-11-29 10:00:00 TP0] Decode batch [1234], #running-req: 9, #token: 99, token usage: 0.01, "
        "cuda graph: True, gen throughput (token/s): 99.00, #queue-req: 0, ",
        dict(kind=D, running_req=9),
    ),
    # --- PD-disaggregation decode server
    (
        "[2026-11-29 10:00:00 DP0 TP0] Decode batch, #running-req: 7, #token: 70, token usage: 0.02, "
        "pre-allocated usage: 0.10, #prealloc-req: 0, #transfer-req: 1, #retracted-req: 0, cuda graph: True, "
        "gen throughput (token/s): 700.00, #queue-req: 0, ",
        dict(kind=D, running_req=7, rank="DP0 TP0", gen_throughput=700.0),
    ),
    # --- wrapped by another logger (vLLM-style prefix)
    (
        "INFO 11-29 10:00:00 [engine.py:12] [2026-11-29 10:00:01 TP0] Decode batch, #running-req: 2, "
        "#token: 5, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0, ",
        dict(
            kind=D,
            ts="2026-11-29T10:00:01",
            rank="TP0",
            running_req=2,
            text="Decode batch, #running-req: 2, #token: 5, token usage: 0.00, cuda graph: True, "
            "gen throughput (token/s): 1.00, #queue-req: 0, ",
        ),
    ),
    # --- wrapped by journald
    (
        "Nov 29 10:00:00 gpu-node-07 python3[123456]: [2026-11-29 10:00:00 TP3] Decode batch, #running-req: 12, "
        "#token: 5, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0, ",
        dict(kind=D, ts="2026-11-29T10:00:00", rank="TP3", running_req=12),
    ),
    # --- wrapped by docker --timestamps
    (
        "2026-11-29T10:00:00.123456789Z [2026-11-29 10:00:00 TP0] Decode batch, #running-req: 1, #token: 5, "
        "token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0, ",
        dict(kind=D, ts="2026-11-29T10:00:00", rank="TP0", running_req=1),
    ),
    # --- wrapped by Ray's actor prefix
    (
        "(SchedulerActor pid=4242) [2026-11-29 10:00:00 TP1] Decode batch, #running-req: 3, #token: 5, "
        "token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0, ",
        dict(kind=D, rank="TP1", running_req=3),
    ),
    # --- odd numbers: nan/inf are not JSON, so null; an int field with a float is null
    (
        "[2026-11-29 10:00:00 TP0] Decode batch, #running-req: 1.5, #token: 5, token usage: nan, "
        "cuda graph: True, gen throughput (token/s): inf, #queue-req: 0, ",
        dict(kind=D, running_req=None, token_usage=None, gen_throughput=None, num_tokens=5, queue_req=0),
    ),
    # --- prefill, current format
    (
        "[2026-11-29 10:00:00 TP0] Prefill batch, #new-seq: 3, #new-token: 256, #cached-token: 576, "
        "token usage: 0.20, #running-req: 1, #queue-req: 2, ",
        dict(
            kind=P, new_seq=3, new_token=256, cached_token=576, token_usage=0.2, running_req=1, queue_req=2, gen_throughput=None
        ),
    ),
    # --- prefill, hybrid + input throughput (PD prefill server)
    (
        "[2026-08-14 08:17:30] Prefill batch, #new-seq: 3, #new-token: 256, #cached-token: 576, "
        "full token usage: 0.20, mamba usage: 0.20, #running-req: 1, #queue-req: 2, #prealloc-req: 0, "
        "#inflight-req: 0, input throughput (token/s): 107534.31, ",
        dict(kind=P, token_usage=0.2, input_throughput=107534.31, new_seq=3),
    ),
    # --- prefill, 2024 period form with cache hit rate
    (
        "[2024-09-02 11:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, "
        "cache hit rate: 0.00%, token usage: 0.00, #running-req: 0, #queue-req: 0",
        dict(kind=P, new_seq=1, new_token=7, cached_token=0, running_req=0),
    ),
    # --- prefill, mid-2024 "(mixed #running-req: N)" form
    (
        "[2024-08-01 09:00:00 TP0] Prefill batch(mixed #running-req: 3). #new-seq: 1, #new-token: 9, "
        "#cached-token: 0, cache hit rate: 0.00%, #running-req: 3, #queue-req: 0",
        dict(kind=P, new_seq=1, new_token=9, running_req=3),
    ),
    # --- ready
    (
        "[2026-11-29 10:00:00] The server is fired up and ready to roll!",
        dict(kind="ready", rank=None, text="The server is fired up and ready to roll!"),
    ),
    # --- our patch: init, switches (both wordings), forced, threshold 0, NOT active
    (
        "[2026-11-29 10:00:00 TP0] Dynamic speculation disable enabled: threshold=5, resume_at<=4, min_dwell_steps=10",
        dict(kind="spec_init", threshold=5, mode=None, batch=None),
    ),
    (
        "[2026-11-29 10:00:00 TP0] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)",
        dict(kind="spec_switch", mode="target_only", batch=7, threshold=5),
    ),
    (
        "[2026-11-29 10:00:00 TP1] Dynamic speculation: switched to speculative (decode batch 3 <= 4, threshold 5)",
        dict(kind="spec_switch", mode="speculative", batch=3, threshold=5, rank="TP1"),
    ),
    (
        "[2026-11-29 10:00:00 TP0] Dynamic speculation: switched to speculative (decode batch 3 <= 4)",
        dict(kind="spec_switch", mode="speculative", batch=3, threshold=None),
    ),
    (
        "[2026-11-29 10:00:00 TP0] Dynamic speculation: switched to target-only (forced)",
        dict(kind="spec_switch", mode="target_only", batch=None, threshold=None),
    ),
    (
        "[2026-11-29 10:00:00 TP0] Dynamic speculation: switched to speculative (threshold 0: never disable)",
        dict(kind="spec_switch", mode="speculative", batch=None, threshold=0),
    ),
    (
        "[2026-11-29 10:00:00 TP0] Dynamic speculation disable NOT active: worker class EAGLEWorker has no hook",
        dict(kind="error"),
    ),
    (
        "[2026-11-29 10:00:00 TP0] Dynamic speculation: refused speculative_disable_batch_threshold=-1: must be >= 0, got -1",
        dict(kind="warning"),
    ),
    (
        "[2026-11-29 10:00:00 TP0] Dynamic speculation: threshold changed 5 -> 8 (resume_at<=7)",
        dict(kind="other", threshold=None),
    ),
    # --- HTTP access lines (uvicorn), bare and behind SGLang's prefix
    ('INFO:     127.0.0.1:45678 - "POST /v1/chat/completions HTTP/1.1" 200 OK', dict(kind="http", ts=None, rank=None)),
    (
        '[2026-11-29 10:00:00] INFO:     127.0.0.1:45678 - "GET /health HTTP/1.1" 503 Service Unavailable',
        dict(kind="http", ts="2026-11-29T10:00:00"),
    ),
    # --- errors and warnings
    ("[2026-11-29 10:00:00] Received sigquit from a child process. It usually means the child failed.", dict(kind="error")),
    ("ERROR:    Exception in ASGI application", dict(kind="error")),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", dict(kind="error")),
    ("WARNING 11-29 10:00:00 [utils.py:99] Port 30000 is busy", dict(kind="warning", ts="10:00:00", text="Port 30000 is busy")),
    (
        "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is deprecated.",
        dict(kind="warning"),
    ),
    ("[2026-11-29 10:00:00 TP0] WARNING: the draft model vocab differs", dict(kind="warning", rank="TP0")),
    # --- everything else
    (
        "[2026-11-29 10:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.12 GB",
        dict(kind="other", rank="TP0"),
    ),
    ("[2026-11-29 10:00:00 TP0] Cache flushed; waiting for requests (#running-req drained)", dict(kind="other")),
    ("nohup: ignoring input", dict(kind="other", ts=None, rank=None, text="nohup: ignoring input")),
    ("", dict(kind="other", text="")),
    ("2026-11-29 10:00:00,123 - sglang - INFO - started", dict(kind="other", ts="2026-11-29T10:00:00.123")),
]
