"""One object per server tying the layers together (the Session API, the session, the run
behind it, subscribers). Imports every layer below; never console or textual."""
