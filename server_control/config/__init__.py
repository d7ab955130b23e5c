"""Profiles: TOML -> validated Profile -> LaunchSpec, the key table, the interpreter a profile
names, the shipped assets. Imports protocol and state."""
