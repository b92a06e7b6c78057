"""``envman lock --pin-apt``: the versions apt in the base image installs now (lock/apt.py)."""

from __future__ import annotations

import os
from collections.abc import Callable

from envman.engine.protocol import ContainerEngine
from envman.errors import ToolError

# the proxy settings apt reads (app/build.py passes the same to builds)
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


def apt_pinner(engine_name: str | None = None) -> Callable[[str, tuple[str, ...]], dict[str, str]]:
    """The apt pinner for ``envman lock --pin-apt``: on the engine ``engine_name`` names, chosen at its first use."""
    from envman.lock.apt import check_pins, parse_simulation, simulate_command

    engine: ContainerEngine | None = None

    def pin(base: str, packages: tuple[str, ...]) -> dict[str, str]:
        nonlocal engine
        if engine is None:
            from envman.engine.select import choose_engine

            engine = choose_engine(engine_name).engine
        engine.provide_base(base)
        proxies = {k: os.environ[k] for k in PROXY_VARS if os.environ.get(k)}
        rc, out, err = engine.run(base, ["sh", "-c", simulate_command(packages)], env=proxies, timeout=900)
        if rc != 0:
            last = (err or out).strip().splitlines()[-1:] or [f"exit {rc}"]
            raise ToolError(f"apt in {base} could not resolve {', '.join(packages)}: {last[0][:300]}",
                            hint="the base image must reach its Debian/Ubuntu archive (a proxy goes in HTTP_PROXY)")
        return check_pins(parse_simulation(out), packages, base)

    return pin
