"""The frozen values that cross boundaries (the session snapshot and its parts, run status,
switch rate and health, the verification verdict, operation results) and the tolerant JSON
readers they share (json_read). Imports protocol only."""
