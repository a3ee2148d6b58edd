"""``benchmark-agent``: one module per group of verbs; :mod:`.main` parses and dispatches."""
