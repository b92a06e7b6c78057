"""Every read of a matrix file (ENVMAN_MATRIX_DIR may name any folder) is bounded: a FIFO in a file's place never
blocks and a huge file is refused unread, each one error naming the file (envman/inputs.py ``read_data``). Before,
the loader, the image tables, the knowledge and the project's tables opened a FIFO and waited forever, and read a
file of any size whole."""

from __future__ import annotations

import os

import pytest

from envman.errors import DataError, MatrixError
from envman.inputs import MAX_DATA

FIFO = "cannot read: not a regular file (a FIFO, socket or device)"
BIG = f"cannot read: {(MAX_DATA + 2**20) / 2**20:.1f} MB, over envman's limit of {MAX_DATA / 2**20:.1f} MB"


def _image_tables(d):
    from envman.image.tables import load_image_tables

    return load_image_tables(d)


def _families(d):
    from envman.lock.one_module import load_families

    return load_families(d)


def _knowledge(d):
    from envman.matrix.knowledge import load_knowledge

    return load_knowledge(d)


def _backends(d):
    from envman.project.package import _backends

    return _backends()


def _locked_imports(d):
    from envman.project.lockedimports import load_table

    return load_table(d)


def _release_dates(d):
    from envman.project.age import FILE, _load
    from envman.resources import matrix_file

    return _load(matrix_file(FILE))


def _lockstep(d):
    from envman.project.lockstep import FILE, _table
    from envman.resources import matrix_file

    return _table(matrix_file(FILE))


def _kit_import_names(d):
    from envman.image.kit import import_names

    return import_names()


def _models_check(d):
    from envman.app.matrix import check_matrix

    return check_matrix(d)


CASES = [  # (file, what reads it, how it is broken); a FIFO where the reader tells it from a file, else a big one
    ("build_needs.yaml", _image_tables, "fifo"), ("system_libraries.yaml", _image_tables, "big"),
    ("one_module.yaml", _families, "fifo"), ("extensions.yaml", _knowledge, "fifo"),
    ("extensions.yaml", _knowledge, "big"), ("build_backends.yaml", _backends, "fifo"),
    ("import_names.yaml", _locked_imports, "big"), ("release_dates.yaml", _release_dates, "big"),
    ("lockstep.yaml", _lockstep, "big"), ("import_names.yaml", _kit_import_names, "big"),
    ("models.yaml", _models_check, "big"),
    # these four fall back to the shipped table when the matrix copy lacks the file; a FIFO there is not "lacking it"
    ("import_names.yaml", _locked_imports, "fifo"), ("release_dates.yaml", _release_dates, "fifo"),
    ("lockstep.yaml", _lockstep, "fifo"), ("import_names.yaml", _kit_import_names, "fifo"),
]


def _break(path, how: str) -> None:
    path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as fh:
            fh.truncate(MAX_DATA + 2**20)  # sparse: no disk, and no memory unless read


@pytest.mark.parametrize(("name", "read", "how"), CASES, ids=[f"{n}-{r.__name__[1:]}-{h}" for n, r, h in CASES])
def test_a_matrix_file_that_is_a_fifo_or_huge_is_one_error_naming_it(matrix_copy, monkeypatch, watchdog, name, read, how):
    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(matrix_copy))
    _break(matrix_copy / name, how)
    with pytest.raises(DataError) as exc:
        read(matrix_copy)
    assert (exc.value.message, exc.value.hint) == (
        f"{matrix_copy / name}: {FIFO if how == 'fifo' else BIG}",
        "envman reads its matrix files as regular files: put a copy of the file from envman's matrices/ there")


@pytest.mark.parametrize("how", ["fifo", "big"])
def test_the_matrix_loader_lists_a_fifo_or_huge_file_with_the_other_problems(matrix_copy, watchdog, how):
    from envman.matrix.load import load_matrix

    _break(matrix_copy / "cuda.yaml", how)
    with pytest.raises(MatrixError) as exc:
        load_matrix(matrix_copy)
    assert exc.value.problems == [f"cuda.yaml: (file): {FIFO if how == 'fifo' else BIG}"]


def test_a_matrix_copy_without_a_newer_table_reads_the_shipped_one(matrix_copy, monkeypatch):
    from envman.resources import matrix_file, shipped_matrix_dir

    monkeypatch.setenv("ENVMAN_MATRIX_DIR", str(matrix_copy))
    (matrix_copy / "lockstep.yaml").unlink()
    assert matrix_file("lockstep.yaml") == shipped_matrix_dir() / "lockstep.yaml"
    assert matrix_file("cuda.yaml") == matrix_copy / "cuda.yaml"
