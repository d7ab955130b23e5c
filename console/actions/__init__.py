"""The console's actions: the one table of actions and keys (``table``: owner, needs_owner,
binding ids) and the handlers of the keys that change the server (``server``). Imports
Textual and server_control's values; never a widget."""
