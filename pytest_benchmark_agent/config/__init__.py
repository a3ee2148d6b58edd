"""The benchmark file: its models, YAML loading, templates, recipes and gate 1."""
