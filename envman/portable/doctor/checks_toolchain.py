"""Building CUDA extensions (flash-attn, apex, torch.utils.cpp_extension): toolkit, nvcc and gcc."""

from __future__ import annotations

from typing import Any

from ..versions import arch_covers, major, major_minor, vt
from . import variants
from .findings import Finding, error, info, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_num, as_str


def _nvcc_used(v: FactsView) -> tuple[str, str | None, int | None] | None:
    """(the nvcc binary, version X.Y, newest gcc it accepts) of the nvcc torch.utils.cpp_extension would run:
    $CUDA_HOME/bin/nvcc when a CUDA home is known, else the one on PATH."""
    home = as_dict(v.f.get("cuda_home"))
    nvcc = as_dict(v.f.get("nvcc"))
    if as_str(home.get("nvcc_version")):
        binary = f"{(as_str(home.get('path')) or 'CUDA_HOME').rstrip('/')}/bin/nvcc"
        if home.get("source") == "nvcc" and as_str(nvcc.get("path")):
            binary = str(nvcc["path"])  # what the user runs, /usr/bin/nvcc
        return binary, major_minor(home.get("nvcc_version")), _int(home.get("max_gcc"))
    if as_str(nvcc.get("version")):
        return as_str(nvcc.get("path")) or "nvcc", major_minor(nvcc.get("version")), _int(nvcc.get("max_gcc"))
    return None


def _int(x: object) -> int | None:
    n = as_num(x)
    return int(n) if n is not None else None


# Packages that compile CUDA code when they run (DeepSpeed's ops, torch.utils.cpp_extension.load through ninja):
# a missing toolkit matters wherever they are installed.
RUNTIME_BUILDS = ("ninja", "deepspeed")
# Packages compiled when they are installed: the toolkit matters only when the installed build lacks the
# kernels a rebuild would add (none found, or none for this GPU above the package's own capability floor).
INSTALL_BUILDS = ("flash-attn", "apex", "causal-conv1d", "mamba-ssm")


def _rebuild_helps(v: FactsView, k: Knowledge, dist: str) -> bool:
    if "extensions" not in v.f:
        return True  # the compiled files were not probed: assume it may be (re)built
    files = [f for f in as_list(as_dict(as_dict(v.f.get("extensions")).get(dist)).get("files")) if isinstance(f, dict)]
    archs = [a for f in files if (a := variants.archs(f))]
    if not archs:
        return True  # installed without its kernels: installing it properly compiles them
    floor = k.package_floor(dist, v.pkg(dist))
    return any(not arch_covers(c, a)[0] and not (floor and tuple(c) < floor) for a in archs for c in v.gpu_ccs())


def _about_to_build(v: FactsView, extras: bool = False) -> list[tuple[str, str]]:
    """(package, where) of uninstalled requirements that compile CUDA code, and ``extras`` only an extra names."""
    locked = as_dict(as_dict(v.f.get("lock")).get("packages"))
    out = []
    for e in as_list(v.f.get("build_intent")):
        e = as_dict(e)
        pkg, extra = as_str(e.get("package")), as_str(e.get("extra"))
        if not pkg or pkg not in INSTALL_BUILDS + ("deepspeed",) or v.pkg(pkg) or (locked and pkg not in locked):
            continue
        where = as_str(e.get("file")) or "the project"
        if (bool(extra) and not locked) == extras:
            out.append((pkg, f"{where}'s extra {extra}" if extra and not locked else where))
    return out


def _builds_extensions(v: FactsView, k: Knowledge) -> str | None:
    """Why this environment compiles CUDA code, or None."""
    intent = _about_to_build(v) + _about_to_build(v, extras=True)
    if intent:
        return ", ".join(f"{p} in {f}, not installed yet" for p, f in intent)
    found = [p for p in RUNTIME_BUILDS if v.pkg(p)]
    found += [p for p in INSTALL_BUILDS if v.pkg(p) and _rebuild_helps(v, k, p)]
    if found:
        return ", ".join(found) + " installed"
    if as_dict(v.f.get("lock")).get("base_kind") == "cuda-devel":
        return "envman.lock asks for a CUDA devel image"
    return None


def _toolkit_pkg(cuda: str) -> str:
    mj, mn = vt(cuda)[:2]
    return f"cuda-toolkit-{mj}-{mn}"


def check_toolkit(v: FactsView, k: Knowledge) -> list[Finding]:
    t = v.torch
    used = _nvcc_used(v)
    if t is None or not t.is_cuda:
        return _gcc(v, used, k)  # gcc against nvcc matters to any CUDA build, torch or not
    out: list[Finding] = []
    cuda = t.cuda or ""
    home = as_dict(v.f.get("cuda_home"))
    nvcc = as_dict(v.f.get("nvcc"))
    building = bool(_about_to_build(v))
    if "cuda_home" in v.f and not home and not as_str(nvcc.get("path")):
        why = _builds_extensions(v, k)
        if why:
            out.append((error if building else warn)(
                "ext-no-cuda-home",
                f"no CUDA toolkit here (CUDA_HOME unset, no nvcc on PATH), but this environment builds CUDA extensions "
                f"({why}): building them for {t.label} will fail ('CUDA_HOME environment variable is not set', 'nvcc "
                f"was not found')",
                f"apt-get install {_toolkit_pkg(cuda)} (NVIDIA's repository), then "
                f"export CUDA_HOME=/usr/local/cuda-{cuda}",
            ))
        return out
    if home and not as_str(home.get("nvcc_version")) and home.get("source") in ("CUDA_HOME", "CUDA_PATH"):
        out.append((error if building else warn)(
            "ext-no-cuda-home",
            f"{home.get('source')}={home.get('path')} has no bin/nvcc ('{str(home.get('path')).rstrip('/')}/bin/nvcc': "
            f"No such file or directory): extension builds will fail",
            f"point it at a CUDA {cuda} toolkit: export CUDA_HOME=/usr/local/cuda-{cuda}",
        ))
    if used and used[1]:
        out += _nvcc_vs_torch(v, k, t.label, cuda, used)
    out += _shadowed(v, home, nvcc)
    out += _gcc(v, used, k)
    return out


def _nvcc_vs_torch(v: FactsView, k: Knowledge, label: str, cuda: str,
                   used: tuple[str, str | None, int | None]) -> list[Finding]:
    where, nv, _ = used
    fix = f"install the CUDA {cuda} toolkit ({_toolkit_pkg(cuda)}) and export CUDA_HOME=/usr/local/cuda-{cuda}"
    if major(nv) != major(cuda):
        # an error where something compiles CUDA code; a toolkit nothing uses is no fault of its own (and in a
        # Dockerfile's image, dockerfile-two-cudas says it)
        builds = _builds_extensions(v, k)
        if not builds and isinstance(v.f.get("dockerfile"), dict):
            return []
        return [(error if builds else info)(
            "ext-nvcc-mismatch",
            f"nvcc {nv} ({where}) and {label}'s CUDA {cuda} differ in major: torch.utils.cpp_extension "
            f"refuses to build extensions" + (f" ({builds})" if builds else "; nothing here builds one now"),
            fix,
        )]
    if nv == cuda:
        return []
    # apex's setup.py refuses any nvcc but the CUDA torch was built with, down to the minor
    # (check_cuda_torch_binary_vs_bare_metal, NVIDIA/apex#323)
    if v.pkg("apex") or any(p == "apex" for p, _ in _about_to_build(v)):
        return [error(
            "ext-nvcc-mismatch",
            f"nvcc {nv} ({where}) ≠ {label}'s CUDA {cuda}, and apex builds only with the CUDA torch was built with: "
            f"'Cuda extensions are being compiled with a version of Cuda that does not match the version used to "
            f"compile Pytorch binaries'",
            fix + f", or a torch built for CUDA {nv}",
        )]
    # torch.utils.cpp_extension only warns on a minor difference ('Most likely this shouldn't be a problem') and
    # DeepSpeed's op builder accepts it ('since the APIs are compatible, accepting this combination')
    return [info(
        "ext-nvcc-mismatch",
        f"nvcc {nv} ({where}) ≠ {label}'s CUDA {cuda} (minor): extensions build (torch and DeepSpeed accept a minor "
        f"difference)",
        fix,
    )]


def _shadowed(v: FactsView, home: dict[str, Any], nvcc: dict[str, Any]) -> list[Finding]:
    """A distro nvcc (or any other) first on PATH while CUDA_HOME names the intended toolkit."""
    hv, pv = as_str(home.get("nvcc_version")), as_str(nvcc.get("version"))
    hp, tk = as_str(home.get("path")), as_str(nvcc.get("toolkit"))
    if not (hv and pv and hp) or home.get("source") == "nvcc":
        return []
    if (tk and tk.rstrip("/") == hp.rstrip("/")) or major_minor(hv) == major_minor(pv):
        return []
    distro = " (a distro package)" if nvcc.get("distro") is True else ""
    fix = f"export PATH={hp.rstrip('/')}/bin:$PATH"
    if distro:
        fix += ", or remove the distro toolkit: sudo apt-get remove nvidia-cuda-toolkit"
    return [warn(
        "ext-nvcc-shadowed",
        f"nvcc on PATH is {nvcc.get('path')}{distro}, CUDA {major_minor(pv)}, but {home.get('source')} points to "
        f"{hp} (CUDA {major_minor(hv)}): CMake and setup.py builds that call nvcc from PATH use the wrong one",
        fix,
    )]


def _gcc(v: FactsView, used: tuple[str, str | None, int | None] | None, k: Knowledge) -> list[Finding]:
    gcc = as_str(v.f.get("gcc"))
    if not gcc or not used or used[2] is None or major(gcc) is None:
        return []
    where, nv, max_gcc = used
    if major(gcc) <= max_gcc:  # type: ignore[operator]
        return []
    sev = error if _about_to_build(v) else warn
    return [sev(
        "ext-gcc-too-new",
        f"gcc {gcc} is newer than nvcc {nv} ({where}) accepts (gcc ≤ {max_gcc}): nvcc stops with '#error -- "
        f"unsupported GNU version! gcc versions later than {max_gcc} are not supported!'",
        f"apt-get install gcc-{max_gcc} g++-{max_gcc}, then export CC=gcc-{max_gcc} CXX=g++-{max_gcc} "
        f"(torch passes CC to nvcc as -ccbin)",
    )]


CHECKS = (check_toolkit,)
