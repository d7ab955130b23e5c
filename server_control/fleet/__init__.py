"""Several servers behind SGLang's gateway (smg): the fleet spec, its members (local sessions
or remote hosts over SSH), the gateway process, the demo fleet. The top layer: imports
session and everything below it; never console or textual."""
