"""The frozen values that cross boundaries (the session snapshot and its parts, operation
results) and their tolerant JSON readers. Imports protocol only."""
