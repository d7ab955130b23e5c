"""The frozen values that cross boundaries, each with one home (the session snapshot and its
parts, a server's load, run status, switch rate and health, the verification verdict,
operation results), the vocabulary (run states and their transitions, change states,
outcomes) and the tolerant JSON readers they share (json_read). Imports protocol only."""
