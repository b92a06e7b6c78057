"""The image in the forms cluster runtimes take, made with the tools those runtimes' own docs use:

  skopeo copy docker-daemon:NAME:TAG oci:LAYOUT:TAG      an OCI image layout (from the local engine, or
                                                         docker://REGISTRY/NAME@sha256:… once pushed)
  skopeo copy oci:LAYOUT:TAG oci-archive:FILE:TAG        the same as one tar (apptainer build … oci-archive:FILE)
  umoci unpack --image LAYOUT:TAG BUNDLE                 an OCI runtime bundle (srun --container=BUNDLE)
  mksquashfs BUNDLE/rootfs NAME.sqsh + enroot's files    an enroot image (srun --container-image=NAME.sqsh)

Each result is made under a temporary name beside its target and renamed into place, so an interrupted export
never leaves a half-written image under the final name. The temporary names carry their run (host, pid, start:
``process.Owner``), so the next export removes what a killed one left (``sweep``) and never a live run's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from envman.cluster.enroot import FILES, enroot_files, mksquashfs_argv
from envman.errors import ToolError, UsageError
from envman.files import abandoned
from envman.process import Owner

PACKAGES = {"skopeo": "skopeo", "umoci": "umoci", "mksquashfs": "squashfs-tools", "apptainer": "apptainer"}


def require(tool: str) -> str:
    exe = shutil.which(tool)
    if not exe:
        raise ToolError(f"{tool} is not installed (needed to export the image for the cluster)",
                        hint=f"apt-get install {PACKAGES.get(tool, tool)} (bash .ci/slurm-up.sh installs them all)")
    return exe


def run_tool(argv: list[str], what: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    require(argv[0])
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ToolError(f"{what}: {argv[0]} did not finish in {timeout:g} s") from None
    if p.returncode != 0:
        last = (p.stderr.strip() or p.stdout.strip()).splitlines()[-3:]
        raise ToolError(f"{what}: {argv[0]} exited {p.returncode}: {' / '.join(last) or 'no output'}",
                        hint="the command was: " + " ".join(argv))
    return p


class Staged:
    """A temporary sibling of ``target``; ``commit()`` renames it into place (replacing an older export)."""

    def __init__(self, target: Path):
        self.target = target
        target.parent.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f".{target.name}.{Owner.me().label}-", suffix=".tmp",
                                         dir=target.parent))
        self.path = self.dir / target.name

    def commit(self) -> Path:
        if self.target.is_dir() and not self.target.is_symlink():
            shutil.rmtree(self.target)
        elif self.target.is_symlink() or (self.target.exists() and self.path.is_dir()):
            self.target.unlink()  # --force over a file of the wrong kind: os.replace cannot put a folder there
        os.replace(self.path, self.target)
        self.cleanup()
        return self.target

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Staged:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


# the forms an export writes (app/cluster_export.py names them NAME_<lock12>.SUFFIX) and what each must be
SUFFIXES = ("bundle", "sqsh", "oci.tar", "oci")
WORK_PREFIX = "envman-oci-"  # the export's own working folder beside the images
_OWNER = r"(?:([0-9a-f]{8}-[0-9]+-[0-9]+)-)?"


def work_prefix() -> str:
    return f"{WORK_PREFIX}{Owner.me().label}-"


def sweep(folder: Path, stem: str) -> list[str]:
    """Remove what a killed export of ``stem`` left in ``folder`` (its staged ``.STEM.SUFFIX.*.tmp`` and the
    ``envman-oci-*`` working folders): only envman's own names, only those ``files.abandoned``. Returns the names
    removed."""
    staged = re.compile(rf"\.{re.escape(stem)}\.(?:{'|'.join(map(re.escape, SUFFIXES))})\.{_OWNER}[A-Za-z0-9_]{{8}}\.tmp")
    work = re.compile(rf"{re.escape(WORK_PREFIX)}{_OWNER}[A-Za-z0-9_]{{8}}")
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        m = staged.fullmatch(e.name) or work.fullmatch(e.name)
        if not m or not e.is_dir(follow_symlinks=False):
            continue
        with contextlib.suppress(OSError):
            if abandoned(e, m.group(1) or ""):
                shutil.rmtree(e.path, ignore_errors=True)
                removed.append(e.name)
    return removed


def kind_problem(path: Path, suffix: str) -> str | None:
    """Why an existing ``path`` is not the export it is named as (None: it is, as far as its shape says)."""
    if path.is_symlink():
        return "a symbolic link"
    if suffix in ("sqsh", "oci.tar"):
        return None if path.is_file() else "not a regular file"
    if not path.is_dir():
        return "not a folder"
    needs = ("config.json", "rootfs") if suffix == "bundle" else ("index.json", "oci-layout")
    missing = [n for n in needs if not (path / n).exists()]
    return f"a folder without {', '.join(missing)}" if missing else None


def check_existing(path: Path, suffix: str, what: str) -> None:
    problem = kind_problem(path, suffix)
    if problem:
        raise UsageError(f"{path} exists but is {problem}, not {what}",
                         hint="move it away, or re-run with --force to replace it")


def to_layout(source: str, layout: Path, tag: str) -> Path:
    """``source``: docker-daemon:NAME:TAG or docker://REF@sha256:…"""
    with Staged(layout) as st:
        run_tool(["skopeo", "copy", "--quiet", source, f"oci:{st.path}:{tag}"], f"copy {source} to an OCI layout")
        return st.commit()


def to_archive(layout: Path, tag: str, archive: Path) -> Path:
    with Staged(archive) as st:
        run_tool(["skopeo", "copy", "--quiet", f"oci:{layout}:{tag}", f"oci-archive:{st.path}:{tag}"],
                 "write the OCI archive")
        return st.commit()


def to_bundle(layout: Path, tag: str, bundle: Path, shm: str) -> Path:
    rootless = ["--rootless"] if os.geteuid() != 0 else []
    with Staged(bundle) as st:
        run_tool(["umoci", "unpack", *rootless, "--image", f"{layout}:{tag}", str(st.path)], "unpack the OCI bundle")
        size_shm(st.path / "config.json", shm)
        return st.commit()


def size_shm(config: Path, size: str) -> None:
    """umoci's runtime config mounts a 64 MiB /dev/shm (measured: ``size=65536k``), Docker's old default, on which
    PyTorch DataLoader workers die with 'bus error': give it the size envman's compose file gives (``size``, e.g. 16g)."""
    doc = json.loads(config.read_text(encoding="utf-8"))
    for m in doc.get("mounts") or []:
        if m.get("destination") == "/dev/shm":
            m["options"] = [o for o in m.get("options") or [] if not o.startswith("size=")] + [f"size={size}"]
    config.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def image_config(layout: Path, tag: str) -> dict[str, Any]:
    """The image config (Env, Cmd, WorkingDir …) of ``tag`` in an OCI layout: index.json → manifest → config."""
    def blob(digest: str) -> dict[str, Any]:
        algo, _, hexd = digest.partition(":")
        return json.loads((layout / "blobs" / algo / hexd).read_text(encoding="utf-8"))

    index = json.loads((layout / "index.json").read_text(encoding="utf-8"))
    for m in index.get("manifests", []):
        if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name") == tag:
            return blob(blob(m["digest"])["config"]["digest"])
    raise ToolError(f"{layout}: no image tagged {tag} in the OCI layout", hint="export it again (--force)")


def to_sqsh(rootfs: Path, config: dict[str, Any], out: Path, provenance: str) -> Path:
    """An enroot image: the root filesystem through mksquashfs, with enroot's environment, fstab and rc files
    added as pseudo files (the bundle's root filesystem stays untouched)."""
    files = enroot_files(config.get("config") or {}, provenance)
    with Staged(out) as st, tempfile.TemporaryDirectory(prefix="envman-enroot-") as tmp:
        pseudo = {}
        for i, (path, text) in enumerate(sorted(files.items())):
            src = Path(tmp) / f"f{i}"
            src.write_text(text, encoding="utf-8")
            pseudo[path] = str(src)
        existing = [p for p in FILES if (rootfs / p).exists() or (rootfs / p).is_symlink()]
        run_tool(mksquashfs_argv(str(rootfs), str(st.path), pseudo, existing), "make the enroot squashfs")
        return st.commit()


def apptainer_available() -> str | None:
    return shutil.which("apptainer")
