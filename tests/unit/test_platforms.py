"""The CPU-architecture axis (issue #13, Platforms): Grace (aarch64) targets resolve to aarch64 stacks, which
lock with uv for aarch64 wheels and render and build linux/arm64 images; x86_64 stays as it was.

The frozen fixture matrix has no aarch64 build and no Grace host: the tests give one of its variants aarch64
wheels and its GH200 a Grace host in memory."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envman.errors import MatrixError, ResolutionError
from envman.image.plan import plan_dockerfile
from envman.image.render import render_dockerfile
from envman.model import Provenance
from envman.resolve.request import build_request
from envman.resolve.resolver import resolve_stack
from envman.resolve.summary import resolution_dict

ARM = Provenance("measured: test wheel torch-X-cp311-cp311-manylinux_2_28_aarch64.whl")


def _with_aarch64(matrix, archs=None):
    """The fixture matrix with the newest torch's PyPI-default build also built for aarch64."""
    rels = list(matrix.frameworks["torch"])
    rel = rels[0]
    variants = tuple(
        replace(v, platforms=("x86_64", "aarch64"), aarch64_prov=ARM, aarch64_archs=archs)
        if v.name == rel.pypi_default else v
        for v in rel.variants
    )
    rels[0] = replace(rel, variants=variants, pypi_default_aarch64=rel.pypi_default)
    gpus = tuple(replace(g, host_arch="aarch64") if g.id == "gh200" else g for g in matrix.gpus)
    return replace(matrix, gpus=gpus, frameworks={**matrix.frameworks, "torch": tuple(rels)}), rels[0]


def _resolve(matrix, **kw):
    return resolve_stack(matrix, build_request(matrix, **kw))


def test_a_grace_target_gets_an_aarch64_stack(matrix):
    m, rel = _with_aarch64(matrix)
    res = _resolve(m, framework="torch", targets=["gh200"])
    assert res.platform == "linux/arm64" and res.arch == "aarch64"
    assert res.version == rel.version and res.variant == rel.pypi_default
    assert res.index_url is None  # the plain PyPI wheel is that build on aarch64 too
    assert any(n.startswith("platform linux/arm64: NVIDIA GH200 Grace Hopper Superchip sits in a Grace (aarch64) host") for n in res.notes)
    assert not [w for w in res.warnings if "Grace" in w]  # the old "no CPU-architecture axis" warning is gone
    assert resolution_dict(res)["platform"] == "linux/arm64"


def test_an_aarch64_build_brings_its_own_arch_list(matrix):
    from envman.model import Cc

    m, _ = _with_aarch64(matrix, archs=(Cc.parse("sm_90"), Cc.parse("sm_100")))
    res = _resolve(m, framework="torch", targets=["gh200"])
    assert res.arch_list == ("sm_90", "sm_100")
    assert res.variant is not None and res.platform == "linux/arm64"


def test_x86_64_targets_keep_linux_amd64(matrix):
    m, _ = _with_aarch64(matrix)
    res = _resolve(m, framework="torch", targets=["h100"])
    assert res.platform == "linux/amd64" and res.arch == "x86_64"
    assert not [n for n in res.notes if n.startswith("platform")]
    assert resolution_dict(res)["platform"] == "linux/amd64"


def test_a_grace_target_with_no_aarch64_build_is_refused_naming_the_platform(matrix):
    m, _ = _with_aarch64(matrix)
    none = replace(m, frameworks={"torch": tuple(replace(r, variants=tuple(replace(v, platforms=("x86_64",))
                                                                         for v in r.variants))
                                                   for r in m.frameworks["torch"])})
    with pytest.raises(ResolutionError) as exc:
        _resolve(none, framework="torch", targets=["gh200"])
    assert any("has Linux aarch64 wheels in the matrix (GH200 sit in aarch64 hosts)" in c
               or "no build of 'torch' has Linux aarch64 wheels" in c for c in exc.value.conflicts)


def test_grace_and_x86_64_targets_together_are_refused_naming_both(matrix):
    m, _ = _with_aarch64(matrix)
    with pytest.raises(ResolutionError) as exc:
        _resolve(m, framework="torch", targets=["gh200", "h100"])
    err = exc.value
    assert err.message.startswith("the targets sit in hosts of two CPU architectures: NVIDIA GH200 Grace Hopper Superchip (aarch64, Grace) and ")
    assert err.message.endswith("NVIDIA H100 SXM5 80GB (x86_64); one image runs on one of them")
    assert err.hint == "split the targets into profiles, one per host architecture"


def _plan(res):
    from envman.lockedstack import BaseImage, LockedStack

    return plan_dockerfile(LockedStack(
        name="p", res=res, base=BaseImage(res.base_image, res.base_kind), inputs_hash="1" * 64,
        fw_lock="requirements.framework.lock.txt", req_lock="requirements.lock.txt",
    ), "0" * 64)


def test_an_aarch64_stack_renders_from_platform_linux_arm64(matrix):
    m, _ = _with_aarch64(matrix)
    arm = render_dockerfile(_plan(_resolve(m, framework="torch", targets=["gh200"])))
    x86 = render_dockerfile(_plan(_resolve(m, framework="torch", targets=["h100"])))
    assert "\nFROM --platform=linux/arm64 python:" in arm
    assert "linux/arm64" in arm.split("dev.envman.stack=", 1)[1].split("\n", 1)[0]  # the summary says so
    assert "--platform" not in x86 and "linux/arm64" not in x86


def test_uv_locks_for_the_stacks_platform(matrix, tmp_path):
    from envman.lock.uv import PLATFORM, python_platform, uv_compile_command, uv_request

    m, _ = _with_aarch64(matrix)
    arm = _resolve(m, framework="torch", targets=["gh200"])
    x86 = _resolve(m, framework="torch", targets=["h100"])
    # the base image (python:3.x-slim-bookworm) runs glibc 2.36: wheels up to manylinux_2_36 (issue 20, pattern 3)
    assert python_platform(arm) == "aarch64-manylinux_2_36" and python_platform(x86) == "x86_64-manylinux_2_36"
    assert PLATFORM == "x86_64-manylinux_2_28"  # the default for a base whose glibc is not known
    cmd = uv_compile_command(tmp_path / "in.txt", tmp_path / "out.txt", arm.python, [], platform=python_platform(arm))
    assert cmd.args[cmd.args.index("--python-platform") + 1] == "aarch64-manylinux_2_36"
    req = uv_request(["torch"], arm.python, [], None, platform=python_platform(arm))
    assert req.args[req.args.index("--python-platform") + 1] == "aarch64-manylinux_2_36"


def test_the_lock_records_the_platform(matrix):
    from envman.lock.lockfile import build_lock

    m, _ = _with_aarch64(matrix)
    arm = _resolve(m, framework="torch", targets=["gh200"])
    from envman.lockedstack import BaseImage, LockedBodies, LockedStack

    lock = build_lock(LockedStack(name="p", inputs_hash="1" * 64, res=arm, base=BaseImage(arm.base_image, arm.base_kind),
                                  locked=LockedBodies(req="", fw="", pylock="")))
    assert lock.python_lock["platform"] == "aarch64-manylinux_2_36"
    assert "platform" not in lock.stack  # said once, in python_lock


def test_buildkit_gets_platform_only_when_asked(tmp_path):
    from envman.engine.buildkit import BuildClient, build_command

    client = BuildClient("native", "/usr/bin/docker", "20.10.24")
    argv, _ = build_command(client, tmp_path, platform="linux/arm64")
    assert argv[argv.index("--platform") + 1] == "linux/arm64"
    argv, _ = build_command(client, tmp_path)
    assert "--platform" not in argv


def test_build_passes_the_locks_platform():
    from envman.app.build import lock_platform
    from envman.lock.lockfile import Lock

    def lock(platform):
        return Lock.create({"lock_version": 1, "name": "p", "stack": {}, "python_lock": {"platform": platform}})

    assert lock_platform(lock("aarch64-manylinux_2_28")) == "linux/arm64"
    assert lock_platform(lock("x86_64-manylinux_2_28")) is None


def test_wheelhouse_target_follows_the_locks_arch(tmp_path):
    from envman.lock import wheelhouse as wh

    (tmp_path / "envman.lock").write_text(
        '{"lock_version": 1, "name": "p", "stack": {"python": "3.12"}, '
        '"python_lock": {"platform": "aarch64-manylinux_2_28"}}')
    assert wh.lock_target(tmp_path) == ("3.12", "2.28", "aarch64")
    plats = wh.WheelTarget("3.12", arch="aarch64").platforms()
    assert plats[0] == "manylinux_2_28_aarch64" and "manylinux2014_aarch64" in plats
    assert not [p for p in plats if p.startswith(("manylinux1", "manylinux2010"))]


# --- the loader ------------------------------------------------------------------------------------


def _load_with(matrix_copy, old: str, new: str):
    from envman.matrix.load import load_matrix

    f = matrix_copy / "torch.yaml"
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new, 1))
    return load_matrix(matrix_copy)


def _problems(exc) -> str:
    return "\n".join(getattr(exc.value, "problems", None) or [str(exc.value)])


CU117 = "      - name: cu117\n"


def test_an_aarch64_variant_loads_with_its_citation(matrix_copy):
    m = _load_with(matrix_copy, CU117, CU117 + '        platforms: [x86_64, aarch64]\n        aarch64: '
                   '{archs: [sm_80, sm_90], measured: "torch-1.13.1-cp311-cp311-manylinux2014_aarch64.whl"}\n')
    rel = next(r for r in m.frameworks["torch"] if str(r.version) == "1.13.1")
    var = rel.variant("cu117")
    assert var.platforms == ("x86_64", "aarch64") and [a.sm for a in var.aarch64_archs] == ["sm_80", "sm_90"]
    assert var.aarch64_prov.source.startswith("measured: torch-1.13.1")
    assert var.on("aarch64").archs == var.aarch64_archs and var.on("x86_64") is var
    assert rel.variant("cu116").platforms == ("x86_64",)  # absent: x86_64 only


@pytest.mark.parametrize("added, problem", [
    ("        platforms: [x86_64, arm]\n", "variants[1].platforms: expected a list of distinct x86_64, aarch64"),
    ("        platforms: [x86_64, aarch64]\n", "variants[1].aarch64: missing: an aarch64 build cites its wheel"),
    ("        aarch64: {measured: x}\n", "variants[1].aarch64: given, but aarch64 is not in platforms"),
    ("        platforms: [x86_64, aarch64]\n        aarch64: {archs: [sm_90]}\n", "variants[1].aarch64.source: missing"),
])
def test_the_loader_refuses_a_bad_platform_entry(matrix_copy, added, problem):
    with pytest.raises(MatrixError) as exc:
        _load_with(matrix_copy, CU117, CU117 + added)
    assert problem in _problems(exc)


def test_pypi_default_aarch64_must_be_an_aarch64_variant(matrix_copy):
    with pytest.raises(MatrixError) as exc:
        _load_with(matrix_copy, "    pypi_default: cu117\n", "    pypi_default: cu117\n    pypi_default_aarch64: cu117\n")
    assert "pypi_default_aarch64: 'cu117' is not one of this release's aarch64 variants (none)" in _problems(exc)
