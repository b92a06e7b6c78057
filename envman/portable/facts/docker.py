"""Docker: is an engine reachable (its API socket, GET /info), and can it hand GPUs to containers?"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
from typing import Any

TOOLKIT_BINARIES = ("nvidia-container-runtime-hook", "nvidia-container-cli", "nvidia-ctk", "nvidia-container-runtime")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


def probe_docker(timeout: float = 1.5, environ: dict[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    d: dict[str, Any] = {}
    host = env.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    info, err = engine_info(host, timeout)
    d["reachable"] = info is not None
    if err:
        d["error"] = err
    if info is not None:
        d["version"] = info.get("ServerVersion")
        runtimes = sorted((info.get("Runtimes") or {}).keys())
        d["runtimes"] = runtimes
        d["default_runtime"] = info.get("DefaultRuntime")
        d["root_dir"] = info.get("DockerRootDir")  # /var/snap/docker/… for the snap package
        d["nvidia_runtime"] = "nvidia" in runtimes
    cdi_dirs = (info or {}).get("CDISpecDirs") or []
    d["toolkit"] = any(shutil.which(b) for b in TOOLKIT_BINARIES)
    d["installed"] = bool(shutil.which("docker") or shutil.which("dockerd"))
    d["cdi"] = any(
        "nvidia" in os.path.basename(p).lower()
        for base in list(CDI_DIRS) + [c for c in cdi_dirs if isinstance(c, str)]
        for p in glob.glob(os.path.join(base, "*"))
    )
    return d


def engine_info(host: str, timeout: float) -> tuple[dict[str, Any] | None, str | None]:
    """GET /info over the engine's unix or tcp socket: (info, None) or (None, why not)."""
    try:
        if host.startswith("unix://"):
            path = host[len("unix://"):]
            if not os.path.exists(path):
                return None, f"no Docker socket at {path}"
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(path)
        elif host.startswith("tcp://"):
            hp = host[len("tcp://"):].rstrip("/")
            h, _, p = hp.rpartition(":")
            s = socket.create_connection((h or "localhost", int(p or 2375)), timeout=timeout)
        else:
            return None, f"DOCKER_HOST={host}: not probed (only unix:// and tcp://)"
    except PermissionError:
        return None, f"permission denied on {host} (add the user to the docker group)"
    except (OSError, ValueError) as exc:
        return None, f"{host}: {getattr(exc, 'strerror', None) or exc}"
    try:
        s.sendall(b"GET /info HTTP/1.0\r\nHost: docker\r\n\r\n")
        chunks = list(iter(lambda: s.recv(65536), b""))  # until the engine closes (HTTP/1.0)
    except OSError as exc:
        return None, f"{host}: {exc.strerror or exc}"
    finally:
        s.close()
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode("latin-1", "replace")
    if " 200 " not in status + " ":
        return None, f"{host}: {status or 'no answer'}"
    try:
        return json.loads(body.decode("utf-8", "replace")), None
    except ValueError:
        return None, f"{host}: /info did not return JSON"
