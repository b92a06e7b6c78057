"""The prices a whole run (`envman fit --tokens N`) is costed at: --price-per-gpu-hour, else envman.yaml's
``price_per_gpu_hour``. envman never invents one."""

from __future__ import annotations

from pathlib import Path

from envman.errors import UsageError

Prices = tuple[tuple[str, float], ...]


def run_prices(given: Prices, path: str) -> tuple[Prices, str | None]:
    """``given`` (the option), else the project's; each GPU name as gpus.yaml's id (an unknown one, or a compute
    capability, is refused naming where it was written). (prices, a note when they came from the file)."""
    from envman.matrix.load import load_matrix
    from envman.project.spec import load_spec
    from envman.resolve.targets import parse_target

    prices, where = given, "--price-per-gpu-hour "
    spec = None if given else load_spec(Path(path))
    if spec is not None:
        prices, where = spec.price_per_gpu_hour, f"{spec.source}: price_per_gpu_hour."
    ids = []
    for name, price in prices:
        try:
            gpu = None if name == "*" else parse_target(load_matrix(), name).gpu
        except UsageError as exc:
            raise UsageError(f"{where}{name}: {exc.message}", hint=exc.hint) from None
        if gpu is None and name != "*":
            raise UsageError(f"{where}{name}: a compute capability, not a GPU", hint="price a GPU by its name, e.g. h100")
        ids.append((gpu.id if gpu else name, price))
    note = f"prices: {spec.source}'s price_per_gpu_hour (--price-per-gpu-hour overrides it)" if spec and ids else None
    return tuple(ids), note
