"""Use cases, one module per command family: values back, never print or exit (cli/ presents them)."""
