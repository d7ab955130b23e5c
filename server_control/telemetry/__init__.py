"""What a server shows while it runs: HTTP polls (/server_info, /metrics) into samples, the
series and switches over time, the switch rate and flapping, NVML GPU samples. Imports logs,
model, protocol and sanitize."""
