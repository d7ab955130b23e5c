"""The simulator's GPUs on the wire: ``GET /sim/gpus`` answers

    {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3 (simulated)", "util": 63,
               "mem_used_mb": 44070, "mem_total_mb": 81559, "power_w": 446.5,
               "temp_c": 54, "pids": [4711]}, ...]}

one entry per simulated GPU (TP x DP ranks), each holding the rank process that drives it.
The simulator serves it (server_control/sim/gpus.py); the console reads it through an
NVML-shaped reader (server_control/telemetry/sim_gpus.py), so the demo's GPU panel shows
load as a GPU's would. Only the simulator serves it: SGLang has no such endpoint (the
console reads real GPUs through NVML).
"""

from __future__ import annotations

PATH = "/sim/gpus"
FIELDS = ("index", "name", "util", "mem_used_mb", "mem_total_mb", "power_w", "temp_c", "pids")
NAME = "NVIDIA H100 80GB HBM3 (simulated)"
MAX_BYTES = 64 * 1024  # the answer's cap on the reader's side (a few hundred bytes a GPU)
