"""The loader: exact messages, every problem at once, and the shipped data's internal consistency."""

from __future__ import annotations

import pytest

from envman.errors import MatrixError
from envman.matrix.load import _load_cached, load_matrix


def _problems(d) -> list[str]:
    _load_cached.cache_clear()
    with pytest.raises(MatrixError) as exc:
        load_matrix(d)
    return exc.value.problems


def test_fixture_matrix_loads(matrix_copy):
    _load_cached.cache_clear()
    m = load_matrix(matrix_copy)
    assert [str(r.version) for r in m.frameworks["torch"]] == ["2.7.1"]
    assert str(m.cuda[0].min_driver) == "570.124.06"  # driver versions keep their zero padding


def test_reports_every_problem_at_once_with_file_and_path(matrix_copy):
    t = (matrix_copy / "torch.yaml").read_text()
    t = t.replace('cuda: "12.8", cudnn', 'cuda: 12.8, cudnn').replace('source: "https://example.test/cpu"', "x: 1")
    (matrix_copy / "torch.yaml").write_text(t)
    g = (matrix_copy / "gpus.yaml").read_text().replace('cc: "8.9"', 'cc: "eight"')
    (matrix_copy / "gpus.yaml").write_text(g)
    assert _problems(matrix_copy) == [
        "gpus.yaml: gpus[1].cc: expected a compute capability like '8.9', got 'eight'",
        "torch.yaml: releases[0].variants[1].cuda: write versions as quoted strings, got 12.8",
        "torch.yaml: releases[0].variants[2].source: missing: every entry cites a primary source URL or 'measured: <how>'",
    ]


def test_cross_check_cuda_and_arch_range(matrix_copy):
    t = (matrix_copy / "torch.yaml").read_text()
    t = t.replace('archs: [sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90]', 'archs: [sm_50, sm_90, sm_120]')
    t = t.replace('name: cu128, cuda: "12.8"', 'name: cu126, cuda: "12.6"').replace("pypi_default: cu128", "pypi_default: cu126")
    (matrix_copy / "torch.yaml").write_text(t)
    assert _problems(matrix_copy) == [
        "torch.yaml: 2.7.1 cu118: archs: sm_120 cannot be compiled by CUDA 11.8",
        "torch.yaml: 2.7.1 cu126: cuda: 12.6 is not a CUDA release in cuda.yaml",
    ]


def test_variant_name_must_match_cuda_and_pypi_default_must_exist(matrix_copy):
    t = (matrix_copy / "torch.yaml").read_text()
    t = t.replace("name: cu118", "name: cu117").replace("pypi_default: cu128", "pypi_default: cu130")
    (matrix_copy / "torch.yaml").write_text(t)
    assert _problems(matrix_copy) == [
        "torch.yaml: releases[0].variants[0].name: 'cu117' does not match cuda '11.8' (expected cu118)",
        "torch.yaml: releases[0].pypi_default: 'cu130' is not one of this release's variants (cpu, cu117, cu128)",
    ]


def test_gpu_alias_collisions_after_normalisation(matrix_copy):
    g = (matrix_copy / "gpus.yaml").read_text().replace('aliases: ["4090"]', 'aliases: ["4090", "H-100"]')
    (matrix_copy / "gpus.yaml").write_text(g)
    assert _problems(matrix_copy) == [
        "gpus.yaml: gpus[1].aliases: 'H-100' also names h100-sxm (normalised: 'h100')",
    ]


def test_yaml_syntax_error_names_line(matrix_copy):
    (matrix_copy / "cudnn.yaml").write_text("schema: 1\nreleases: [\n")
    probs = _problems(matrix_copy)
    assert len(probs) == 1 and probs[0].startswith("cudnn.yaml: line 3, column 1: invalid YAML")


def test_schema_version_and_missing_file(matrix_copy):
    (matrix_copy / "cudnn.yaml").write_text("schema: 2\nreleases: []\n")
    (matrix_copy / "gpus.yaml").unlink()
    assert _problems(matrix_copy) == [
        "gpus.yaml: (file): cannot read: No such file or directory",
        "cudnn.yaml: schema: expected 1, got 2",
    ]


def test_uncertain_entries_need_a_note(matrix_copy):
    c = (matrix_copy / "cudnn.yaml").read_text().replace('min_cc: "5.0", source: "https://example.test/cudnn97"',
                                                         'min_cc: "5.0", uncertain: true, source: "https://example.test/cudnn97"')
    (matrix_copy / "cudnn.yaml").write_text(c)
    assert _problems(matrix_copy) == ["cudnn.yaml: releases[2].note: missing: an uncertain entry says what is unsure"]


# --- the shipped data ------------------------------------------------------------------------


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
