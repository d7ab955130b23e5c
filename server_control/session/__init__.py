"""One object per server tying the layers together (the Session API, the session, the run
behind it, subscribers). Imports supervision and every layer below it; never fleet, console
or textual."""
