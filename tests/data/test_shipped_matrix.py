"""The shipped matrices/: what users get today, and the data's own consistency.

The only tests a data change edits. Logic and golden tests run on the frozen tests/fixtures/matrix; here
the same resolver runs on matrices/, so a row that fails after a data change is a real change in what
envman hands out: read its `why`, then update the row (or the data). An unused addition (a CUDA release
no build uses) fails nothing.
"""

from __future__ import annotations

import pytest

from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack

# (request, expected stack, why) — the stack is compared field by field on the Resolution.
SCENARIOS = [
    (dict(framework="torch", targets=["h100"], driver=">=595.71.05"),
     dict(version="2.15.0", variant="cu132", python="3.12", cuda="13.2"),
     "the newest torch the matrix knows, in its plain PyPI build, on a driver that runs CUDA 13.2 fully"),
    (dict(framework="torch", targets=["h100"]), dict(version="2.14.1", variant="cu130", cuda="13.0", driver_mode="full"),
     "no --driver: the assumed current driver (R580) runs 2.15.0's only build (cu132) through minor-version "
     "compatibility alone, so the newest build it runs fully is the default (issue 20: no warning by default)"),
    (dict(framework="torch", targets=["rtx-5090"], driver=">=595.71.05"), dict(version="2.15.0", variant="cu132"),
     "Blackwell (sm_120) is in every build from 2.7 on: the newest wins"),
    (dict(framework="torch==2.7.*", targets=["rtx-5090"]), dict(version="2.7.1", variant="cu128"),
     "an RTX 5090 needs torch >= 2.7, and in 2.7 only cu128 carries sm_120"),
    (dict(framework="torch", targets=["rtx-5090"], driver="570.86.16"), dict(version="2.11.0", variant="cu128"),
     "R570 (the Blackwell floor) runs CUDA 12.x only: the newest line that still has a 12.8 build"),
    (dict(framework="torch", targets=["v100"]), dict(version="2.14.1", variant="cu126"),
     "Volta is not in the cu13x builds (they start at sm_75)"),
    (dict(framework="torch", targets=["v100", "rtx-5090"]), dict(version="2.10.0", variant="cu128"),
     "the newest single build that carries both sm_70 and sm_120"),
    (dict(framework="torch", targets=["k80"]), dict(version="2.3.1", variant="cu118"),
     "Kepler: cuDNN 9 (torch 2.4+) dropped sm_37"),
    (dict(framework="torch", targets=["a100"], driver="450.80.02"), dict(version="2.7.1", variant="cu118"),
     "R450 is the CUDA 11.x minor-compatibility floor: the newest cu118 build"),
    (dict(framework="torch", targets=["h100"], driver="535.104.05"), dict(version="2.14.1", variant="cu126"),
     "R535 runs 12.x builds through minor-version compatibility, not 13.x"),
    (dict(framework="tensorflow", targets=["h100"]), dict(version="2.21.0", variant="cu125"),
     "the newest TensorFlow and the CUDA it was tested with"),
    (dict(framework="tensorflow==2.13.*", targets=["a100"]), dict(version="2.13.1", variant="cu118", python="3.10"),
     "TF 2.13 uses the system CUDA: the CUDA base image's Python"),
    (dict(framework="torch", cpu=True), dict(version="2.15.0", variant="cpu", python="3.12"),
     "CPU only: the newest torch, cpu build"),
    (dict(targets=["h100"], driver="550.54.15"), dict(framework=None, cuda="12.4"),
     "no framework: the newest CUDA toolkit the driver runs in full"),
]


@pytest.mark.parametrize("request_, expected, why", SCENARIOS, ids=[s[2] for s in SCENARIOS])
def test_scenario(matrix, request_, expected, why):
    res = resolve_stack(matrix, build_request(matrix, **request_))
    got = {k: (None if getattr(res, k) is None else str(getattr(res, k))) for k in expected}
    assert got == expected, why


# --- the data's own consistency ----------------------------------------------------------------


def test_envman_reads_the_shipped_matrix_unless_told_otherwise(monkeypatch):
    from envman.resources import matrix_dir, shipped_matrix_dir

    monkeypatch.delenv("ENVMAN_MATRIX_DIR")
    assert matrix_dir() == shipped_matrix_dir() and (shipped_matrix_dir() / "cuda.yaml").is_file()


def test_shipped_matrices_are_consistent(matrix):
    # load_matrix already cross-checks; these are the facts every later stage leans on.
    assert len(matrix.gpus) >= 40
    torch = {str(r.version): r for r in matrix.frameworks["torch"]}
    for v in ("1.13.0", "2.0.0", "2.4.0", "2.7.1", "2.14.1"):
        assert v in torch, v
    tf = {str(r.version) for r in matrix.frameworks["tensorflow"]}
    assert "2.10.0" in tf and "2.15.0" in tf
    majors = {m.major for m in matrix.cuda_majors}
    assert majors >= {11, 12, 13}
    assert {c.label for c in matrix.cuda} >= {"11.0", "11.8", "12.0", "12.8", "13.0"}


def test_every_shipped_entry_has_a_source(matrix):
    entries = [*matrix.cuda, *matrix.gpus, *matrix.cudnn, *matrix.base_images.cuda]
    for rels in matrix.frameworks.values():
        for r in rels:
            entries.append(r)
            entries.extend(r.variants)
    for e in entries:
        assert e.prov.source.startswith(("http://", "https://", "measured:")), e
        assert not e.prov.uncertain or e.prov.note, e


def test_measured_torch_2_14_1(matrix):
    rel = next(r for r in matrix.frameworks["torch"] if str(r.version) == "2.14.1")
    assert rel.pypi_default == "cu130"
    v = rel.variant("cu130")
    assert v.cudnn == "9.24.0.43" and v.nccl == "2.30.7" and str(v.cuda) == "13.0"
    assert [a.sm for a in sorted(v.archs)] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


def test_shipped_matrix_feeds_the_doctor(matrix):
    from envman.matrix.knowledge import knowledge_from_matrix

    k = knowledge_from_matrix(matrix)
    assert k.releases["torch"] and k.min_driver and k.minor_floor


def test_the_shipped_matrix_agrees_with_every_source_snapshot():
    """matrix check with the sources: NVIDIA's GPU list, PyTorch's release build matrices, the CUDA runfiles,
    PyPI's NVIDIA wheels as last synced (matrices/sources/*.tsv) — every disagreement is a line here
    (the workshop's check: python -m tools.matrix check --sources)."""
    from envman.resources import shipped_matrix_dir
    from tools.matrix.app import check_matrix

    assert check_matrix(shipped_matrix_dir()) == []


def test_no_floor_nvidia_lists_is_uncertain(matrix):
    listed = [g for g in matrix.gpus if g.listed is not None and g.min_driver == g.listed]
    assert len(listed) >= 20
    for g in listed:
        assert not g.min_driver_prov.uncertain, g.id
        assert g.min_driver_prov.source.startswith("https://github.com/NVIDIA/open-gpu-kernel-modules/blob/"), g.id


# seen on unseen repositories (docs/repos.md, 2026-12-07): coqui-ai/TTS@dbf1a08 imports umap (umap-learn locked),
# neuraloperator/neuraloperator@93d3f06 tltorch (tensorly-torch locked) and mpl_toolkits (matplotlib locked); the
# warning proposed `umap`, `tltorch`, `mpl-toolkits`: another project on PyPI, or none
@pytest.mark.parametrize("module,dist", [("umap", "umap-learn"), ("tltorch", "tensorly-torch"),
                                         ("mpl_toolkits.mplot3d", "matplotlib")])
def test_a_module_whose_distribution_has_another_name_is_provided_by_it(tmp_path, module, dist):
    from envman.project.lockedimports import load_table, missing_imports
    from envman.resources import shipped_matrix_dir

    (tmp_path / "train.py").write_text(f"import {module}\n")
    table = load_table(shipped_matrix_dir())
    assert missing_imports(tmp_path, {dist: "1.0"}, "requirements.txt", table) == []
    assert missing_imports(tmp_path, {}, "requirements.txt", table) == [
        f"warning: train.py:1 imports {module.split('.')[0]}, which nothing in the lock provides: add `{dist}` to "
        "requirements.txt"]
