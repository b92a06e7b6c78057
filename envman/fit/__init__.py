"""``envman fit``: will a training run fit a GPU, and if not, what to change (docs/architecture.md: its modules)."""
