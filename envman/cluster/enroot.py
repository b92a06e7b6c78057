"""PURE: the files that make a root filesystem an enroot image, from the image's config — what
``enroot import`` writes (NVIDIA/enroot doc/image-format.md, src/docker.sh ``docker::configure``):

  /etc/environment  the image's Env, one NAME=value per line (enroot's runtime reads it for the container)
  /etc/fstab        one bind mount per declared Volume, relative to the container's root
  /etc/rc           the entrypoint: a provenance comment, the labels as comments, cd to WorkingDir, source
                    /etc/rc.local, then exec Entrypoint + (arguments given, or Cmd)
  /etc/rc.local     an empty hook, sourced by /etc/rc

and the mksquashfs options enroot uses (ENROOT_SQUASH_OPTIONS' default plus -all-root), with fixed timestamps
so the same image gives the same .sqsh (enroot does that only when SOURCE_DATE_EPOCH is set).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from envman.cluster.values import CONTROL
from envman.errors import ToolError

SQUASH_OPTIONS = ("-comp", "lzo", "-noD", "-exit-on-error", "-all-root", "-no-progress")
FIXED_TIME = ("-mkfs-time", "0", "-all-time", "0")
FILES = ("etc/environment", "etc/fstab", "etc/rc", "etc/rc.local")


def enroot_files(config: Mapping[str, Any], provenance: str) -> dict[str, str]:
    """``config``: the image config's ``config`` object (Env, Entrypoint, Cmd, WorkingDir, Labels, Volumes)."""
    env = [str(e) for e in config.get("Env") or []]
    bad = next((e for e in env if CONTROL.search(e)), None)
    if bad is not None:  # one line each in /etc/environment: a newline would add a variable of its own
        raise ToolError(f"the image's Env entry {bad[:80]!r} holds a control character",
                        hint="enroot's /etc/environment takes one NAME=value per line: rebuild the image without it")
    volumes = sorted((config.get("Volumes") or {}).keys())
    fstab = "".join(f"${{ENROOT_ROOTFS}}{v} {v} none x-create=dir,bind,rw,nosuid,nodev\n" for v in volumes)
    return {
        "etc/environment": "".join(e + "\n" for e in env),
        "etc/fstab": fstab,
        "etc/rc": rc_script(config, provenance),
        "etc/rc.local": "# This file is sourced by /etc/rc when the container starts.\n"
                        "# It can be used to manipulate the entrypoint or the command of the container.\n",
    }


def rc_script(config: Mapping[str, Any], provenance: str) -> str:
    entry = [str(a) for a in config.get("Entrypoint") or []]
    cmd = [str(a) for a in config.get("Cmd") or []]
    if not entry and not cmd:
        cmd = ["/bin/sh"]
    workdir = str(config.get("WorkingDir") or "/")
    labels = sorted((config.get("Labels") or {}).items())
    head = [f"# enroot-provenance: {_one_line(provenance)}"] + [f"# {k} {_one_line(str(v))}" for k, v in labels]
    e, c = " ".join(shlex.quote(a) for a in entry), " ".join(shlex.quote(a) for a in cmd)
    return "\n".join(head) + "\n\n" + (
        f"mkdir -p {shlex.quote(workdir)} 2> /dev/null\n"
        f"cd {shlex.quote(workdir)} && unset OLDPWD || exit 1\n\n"
        "if [ -s /etc/rc.local ]; then\n    . /etc/rc.local\nfi\n\n"
        f'if [ $# -gt 0 ]; then\n    exec {e + " " if e else ""}"$@"\nelse\n    exec {" ".join(x for x in (e, c) if x)}\nfi\n'
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def mksquashfs_argv(rootfs: str, out: str, pseudo: Mapping[str, str], existing: list[str]) -> list[str]:
    """``pseudo``: path in the image → a file holding its content (mksquashfs -p "PATH f 644 0 0 cat FILE");
    ``existing``: those of them the root filesystem already has (excluded, else mksquashfs refuses)."""
    argv = ["mksquashfs", rootfs, out, "-noappend", *SQUASH_OPTIONS, *FIXED_TIME]
    for path, src in sorted(pseudo.items()):
        argv += ["-p", f"{path} f 644 0 0 cat {shlex.quote(src)}"]
    if existing:
        argv += ["-e", *sorted(existing)]  # -e takes every argument after it
    return argv
