"""The dependency-file formats `envman init` reads beside the requirement files and pyproject.toml: one
``FileReader`` each. A new format is a module under ``project/sources/`` with a ``read(root, wanted)`` and one
line in ``READERS`` (docs/architecture.md, "where to add"). pyproject.toml's tables (parsed once, shared by four
readers), requirement files (chosen among alternatives) and conda environment files (one chosen among variants,
also in sub-folders) keep their own selection in project/discover.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from envman.project.sources import Found
from envman.project.sources.pipfile import read_pipfile
from envman.project.sources.pixi import read_pixi
from envman.project.sources.setup_py import read_setup_cfg, read_setup_py


@dataclass(frozen=True)
class FileReader:
    file: str  # the file at the repository's top, as the report names it
    # (repository root, extras asked for) → what it declares, or None when the repository has no such file
    read: Callable[[Path, tuple[str, ...]], Found | None]


def _if_present(file: str, reader: Callable[[Path, str, tuple[str, ...]], Found]):
    def read(root: Path, wanted: tuple[str, ...]) -> Found | None:
        return reader(root, file, wanted) if (root / file).is_file() else None

    return read


READERS: tuple[FileReader, ...] = (
    FileReader("setup.py", _if_present("setup.py", read_setup_py)),
    FileReader("setup.cfg", _if_present("setup.cfg", read_setup_cfg)),
    FileReader("Pipfile", read_pipfile),
    FileReader("pixi.toml", read_pixi),
)


def files() -> tuple[str, ...]:
    return tuple(r.file for r in READERS)
