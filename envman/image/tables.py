"""matrices/build_needs.yaml and matrices/system_libraries.yaml → the plain rows image/stages.py plans with.

Validated at the boundary, every problem at once, as ``file: dotted.path: what is wrong``; each row must
cite a source, like every other matrix entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envman.errors import DataError
from envman.image.stages import BuildNeed, NvccWheel, SystemLibraries
from envman.matrix.load import load_tables

BUILD_NEEDS = "build_needs.yaml"
SYSTEM_LIBRARIES = "system_libraries.yaml"
_FLAGS = ("framework", "cuda", "compiler")


@dataclass(frozen=True)
class ImageTables:
    build_needs: dict[str, BuildNeed]
    nvcc: dict[str, NvccWheel]  # by CUDA major
    system_libraries: dict[str, SystemLibraries]
    digest: str  # of both files' bytes: part of a lock's inputs


def _strings(value, where: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(f"{where}: expected a list of names")
        return ()
    return tuple(value)


def _apt_names(value, where: str, problems: list[str]) -> tuple[str, ...]:
    """Debian package names (policy's grammar): they reach an apt-get line in the Dockerfile."""
    names = _strings(value, where, problems)
    bad = [n for n in names if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", n)]
    if bad:
        problems.append(f"{where}: not Debian package names: {', '.join(bad)}")
        return ()
    return names


def _rows(doc, file: str, problems: list[str]) -> dict:
    if not isinstance(doc, dict) or doc.get("schema") != 1 or not isinstance(doc.get("packages"), dict):
        problems.append(f"{file}: (top): expected schema: 1 and a mapping packages: {{name: {{…}}}}")
        return {}
    out = {}
    for name, row in doc["packages"].items():
        where = f"{file}: packages.{name}"
        if not isinstance(row, dict):
            problems.append(f"{where}: expected a mapping")
            continue
        if not isinstance(row.get("source"), str) or not row["source"].strip():
            problems.append(f"{where}.source: missing (every entry cites where it comes from)")
        if canonicalize_name(str(name)) != name:
            problems.append(f"{where}: write the normalized name {canonicalize_name(str(name))!r}")
        out[str(name)] = row
    return out


def load_image_tables(directory: Path | None = None) -> ImageTables:
    return load_tables("image-tables-documents", (BUILD_NEEDS, SYSTEM_LIBRARIES), _tables, directory)


def _tables(docs: dict[str, Any], digest: str) -> ImageTables:
    """The validated tables from the files' documents (just parsed, or from the cache: the same checks)."""
    problems: list[str] = []
    needs = {}
    for name, row in _rows(docs[BUILD_NEEDS], BUILD_NEEDS, problems).items():
        problems += [f"{BUILD_NEEDS}: packages.{name}.{k}: unknown key" for k in row
                     if k not in (*_FLAGS, "build_requires", "source", "apt")]
        flags = {k: row.get(k, k == "compiler") for k in _FLAGS}
        problems += [f"{BUILD_NEEDS}: packages.{name}.{k}: expected true or false" for k, v in flags.items()
                     if not isinstance(v, bool)]
        needs[name] = BuildNeed(name, **{k: bool(v) for k, v in flags.items()},
                                build_requires=_strings(row.get("build_requires"), f"{BUILD_NEEDS}: packages.{name}.build_requires", problems),
                                source=str(row.get("source", "")),
                                apt=_apt_names(row.get("apt"), f"{BUILD_NEEDS}: packages.{name}.apt", problems))
    nvcc = {}
    for major, row in ((docs[BUILD_NEEDS] or {}).get("nvcc") or {}).items():
        where = f"{BUILD_NEEDS}: nvcc.{major}"
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) and row[k] for k in ("wheel", "home", "source")):
            problems.append(f"{where}: expected wheel, home and source")
            continue
        also = _strings(row.get("also"), f"{where}.also", problems)
        nvcc[str(major)] = NvccWheel(str(major), row["wheel"], row["home"], row["source"], also)
    libs = {}
    for name, row in _rows(docs[SYSTEM_LIBRARIES], SYSTEM_LIBRARIES, problems).items():
        apt = _strings(row.get("apt"), f"{SYSTEM_LIBRARIES}: packages.{name}.apt", problems)
        if not apt:
            problems.append(f"{SYSTEM_LIBRARIES}: packages.{name}.apt: missing")
        alt = row.get("alternative")
        if alt is not None and not isinstance(alt, str):
            problems.append(f"{SYSTEM_LIBRARIES}: packages.{name}.alternative: expected a distribution name")
        libs[name] = SystemLibraries(name, apt, alt, str(row.get("source", "")))
    if problems:
        raise DataError("envman's image tables are invalid:\n  " + "\n  ".join(problems),
                        hint="fix the entries named above")
    return ImageTables(needs, nvcc, libs, digest)
