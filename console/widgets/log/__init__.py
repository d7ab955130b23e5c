"""The log view: the pane, its rows, search, selection, prompts, formatting and the folding of TP ranks."""
