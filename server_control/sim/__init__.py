"""The simulated SGLang 0.5.23 server (``python -m server_control.sim``): its HTTP API, the
scheduler and TP ranks, the log lines and metrics the real server writes. Imports only the
standard library, its web stack (starlette, uvicorn, prometheus_client) and ``server_control.protocol``; it is
started as a process by ``server_control.proc.sim_launcher``."""
