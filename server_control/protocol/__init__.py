"""The wire contract of dynamic speculation: the switch, the TP-rank verdict, the metric
definitions, API keys through the environment, the simulator's ``--sim-*`` flag table and
the one SGLang version. Standard library only; the only part of server_control that sim/
and sglang_patch/ import."""
