"""The compatibility matrix: load.py reads and validates matrices/*.yaml into the model (every problem
at once, as file: dotted.path: problem; frameworks bring their own schema loaders), refresh.py proposes
new entries from real wheels."""
