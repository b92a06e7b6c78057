"""apt packages as a lock pins them: the versions the distribution's archive offers for the image's apt step,
read from apt itself (``apt-get install --simulate`` in the base image, which resolves the whole closure the
way the build will), and the snapshot archive that keeps offering them.

Why both: a pin alone makes a build fail loudly once the archive has moved on (Debian keeps one version per
suite; a point release replaces it), instead of silently installing another one; a snapshot archive
(snapshot.debian.org, snapshot.ubuntu.com) at the lock's date keeps serving the pinned versions (the
Dockerfile's sources for it: image/plan.py ``apt_snapshot_sources``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from envman.errors import ToolError

# Debian policy: package names [a-z0-9][a-z0-9+.-]+, versions [epoch:]upstream[-revision] of [A-Za-z0-9.+~:-]
NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+\Z")
VERSION = re.compile(r"^[A-Za-z0-9.+~:-]+\Z")
_INST = re.compile(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) ")


def simulate_command(packages: Sequence[str]) -> str:
    """What runs in the base image: the archive's lists, then the install apt would do, without doing it."""
    names = " ".join(shlex.quote(p) for p in sorted(set(packages)))
    return ("apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive "
            f"apt-get install --simulate --no-install-recommends {names}")


def parse_simulation(text: str) -> dict[str, str]:
    """{package: version} of every ``Inst`` line (the requested packages and everything they pull in,
    upgrades of the base's own packages included)."""
    pins = {}
    for line in text.splitlines():
        m = _INST.match(line.strip())
        if m and NAME.match(m.group(1)) and VERSION.match(m.group(2)):
            pins[m.group(1).split(":")[0]] = m.group(2)
    return dict(sorted(pins.items()))


def check_pins(pins: Mapping[str, str], requested: Sequence[str], base: str) -> dict[str, str]:
    missing = sorted(set(requested) - set(pins))
    if missing and not pins:
        raise ToolError(f"apt in {base} would install nothing for {', '.join(missing)}",
                        hint="check the package names (apt-cache policy NAME in the base image)")
    return dict(pins)


def snapshot_stamp(source_date_epoch: int) -> str:
    """The snapshot archives' timestamp form (20261123T180113Z) of the lock's date."""
    return datetime.fromtimestamp(source_date_epoch, tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")
