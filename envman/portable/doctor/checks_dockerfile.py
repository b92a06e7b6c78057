"""Checks on a Dockerfile itself (facts ``dockerfile``, from dockerfile_facts.py)."""

from __future__ import annotations

from typing import Any

from ..versions import major
from .findings import Finding, error, info, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict, as_list, as_str

INIT = "run `envman init` in the project to generate a Dockerfile that is right for its GPUs"


def _df(v: FactsView) -> dict[str, Any]:
    return as_dict(v.f.get("dockerfile"))


def check_base(v: FactsView, k: Knowledge) -> list[Finding]:
    """What was not read: a base image envman cannot place, requirement files that are not beside the Dockerfile."""
    d = _df(v)
    base = as_dict(d.get("base"))
    out = []
    if d and base.get("kind") in ("unknown", "ngc"):
        what = "NVIDIA's NGC container of that release" if base.get("kind") == "ngc" else "this image"
        out.append(info(
            "dockerfile-base-unknown",
            f"{d.get('path')}:{base.get('line')}: FROM {base.get('image')}: envman does not know what {what} holds "
            f"(CUDA, cuDNN, Python, framework): what depends on it is not checked",
            INIT,
        ))
    elif d and base.get("uncertain"):
        fw = as_dict(base.get("framework"))
        out.append(info(
            "dockerfile-base-unknown",
            f"{d.get('path')}:{base.get('line')}: FROM {base.get('image')}: read from its tag as {fw.get('name')} "
            f"{fw.get('version')} with CUDA {base.get('cuda')} (not an image envman's matrix describes)",
            None,
        ))
    unread = [as_dict(u) for u in as_list(d.get("unread"))]
    if unread:
        out.append(info(
            "dockerfile-requirements-unread",
            f"{d.get('path')}: {', '.join(str(u.get('file')) for u in unread)} (line "
            f"{', '.join(str(u.get('line')) for u in unread)}) not found beside the Dockerfile or in the project: the "
            f"packages it installs are not judged",
            "run it from the project directory (envman doctor --dockerfile path/to/Dockerfile in the repository root)",
        ))
    return out


def check_two_cudas(v: FactsView, k: Knowledge) -> list[Finding]:
    """FROM nvidia/cuda:11.8 and then a torch wheel that pulls in CUDA 13's libraries: two CUDAs, one unused."""
    d = _df(v)
    base = as_dict(d.get("base"))
    cuda = as_str(base.get("cuda"))
    if base.get("kind") not in ("cuda", "pytorch") or not cuda:
        return []
    out = []
    for name, rec in sorted(as_dict(d.get("frameworks")).items()):
        rec = as_dict(rec)
        fw_cuda = as_str(rec.get("cuda"))
        if not rec.get("wheels") or not fw_cuda or major(fw_cuda) == major(cuda):
            continue
        label = next((fw.label for fw in v.frameworks if fw.name == name), f"{name} {rec.get('version')}")
        newest = k.newest(name)
        py = v.python or (newest.python[-1] if newest and newest.python else "<python>")
        out.append(warn(
            "dockerfile-two-cudas",
            f"{d.get('path')}:{rec.get('line')}: {label} brings the CUDA {fw_cuda} libraries in its nvidia-* wheels, "
            f"but the image is FROM {base.get('image')} (CUDA {cuda}): two CUDAs in one image, several GB, and the "
            f"base's is unused (its nvcc builds extensions for CUDA {cuda}, not {fw_cuda})",
            f"start FROM a base without CUDA (python:{py}-slim) and let the wheels bring "
            f"it, or install "
            f"the {name} build for CUDA {cuda}; or " + INIT,
        ))
    return out


def check_replaced(v: FactsView, k: Knowledge) -> list[Finding]:
    """FROM pytorch/pytorch:2.1.0-cuda12.1 … and then a requirements file that installs another torch."""
    d = _df(v)
    out = []
    for r in as_list(d.get("replaced")):
        r = as_dict(r)
        base = as_dict(d.get("base"))
        new = f"{r.get('name')} {r.get('new')}" + (f" (CUDA {r.get('new_cuda')})" if r.get("new_cuda") else "")
        out.append(warn(
            "dockerfile-framework-replaced",
            f"{d.get('path')}:{r.get('line')}: installs {new} over the {r.get('name')} {r.get('old')} (CUDA "
            f"{r.get('old_cuda') or '?'}) that FROM {base.get('image')} ships: the base image's build is downloaded "
            f"for nothing and the CUDA the image was chosen for is not the one that runs",
            f"pin {r.get('name')}=={r.get('old')} in the requirements (or drop it there), or start FROM the image of "
            f"the {r.get('name')} you need; or " + INIT,
        ))
    return out


def check_nvidia_env(v: FactsView, k: Knowledge) -> list[Finding]:
    """A CUDA framework in an image without NVIDIA_VISIBLE_DEVICES: the bare nvidia runtime injects no GPU."""
    d = _df(v)
    if not d or "NVIDIA_VISIBLE_DEVICES" in as_dict(d.get("env")):
        return []
    if as_dict(d.get("base")).get("kind") not in ("python", "distro"):
        return []  # NVIDIA's and framework images set them; what a third party's image sets is not known
    fw = next((fw for fw in v.frameworks if fw.gpu is True), None)
    if fw is None:
        return []
    # a note, not a warning: `docker run --gpus all` (what PyTorch's and NVIDIA's pages tell) and compose's device
    # reservations give the container its GPUs without these variables; only the bare nvidia runtime needs them
    return [info(
        "dockerfile-no-nvidia-env",
        f"{d.get('path')}: the image has {fw.label} but no NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES in its "
        f"environment: `docker run --gpus all` gives it the GPUs; started with the nvidia runtime and no --gpus flag "
        f"(compose `runtime: nvidia`) it gets none and {fw.name} runs on the CPU",
        "run it with --gpus all, or add ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility "
        "(NVIDIA's images set both)",
    )]


def check_unresolved(v: FactsView, k: Knowledge) -> list[Finding]:
    """`pip install tensorflow` in a python:3.14 image: no release has wheels for that Python."""
    d = _df(v)
    out = []
    for u in as_list(d.get("unresolved")):
        u = as_dict(u)
        py = as_str(u.get("python"))
        if u.get("in_matrix") is False:
            out.append(info(
                "not-in-matrix",
                f"{d.get('path')}:{u.get('line')}: {u.get('name')} {u.get('spec')}: no release in envman's matrix is in "
                f"that range: what it installs is not checked",
                "update envman, or " + INIT,
            ))
            continue
        fw = "torch" if u.get("name") in ("torch", "pytorch") else "tensorflow"
        newest = k.newest(fw)
        with_py = next((r for r in k.releases.get(fw, ()) if not py or py in r.python), None)
        fix = (f"use a base with Python {newest.python[-1]} (the newest {fw} {newest.version} has wheels for "
               f"{', '.join(newest.python)})" if newest and newest.python else "use a Python its wheels exist for")
        if with_py is not None and py:
            fix += f", or {fw}=={with_py.version}"
        out.append(error(
            "dockerfile-no-wheel",
            f"{d.get('path')}:{u.get('line')}: {u.get('name')} {u.get('spec')} has no release with wheels for Python "
            f"{py or '?'} in envman's matrix: 'No matching distribution found for {u.get('name')}'",
            fix + "; or " + INIT,
        ))
    return out


def check_base_driver(v: FactsView, k: Knowledge) -> list[Finding]:
    """FROM nvidia/cuda:12.4 on a driver below it: the toolkit refuses it ('unsatisfied condition')."""
    d = _df(v)
    base = as_dict(d.get("base"))
    cuda = as_str(base.get("cuda"))
    if base.get("kind") != "cuda" or not cuda or not v.driver or k.driver_mode(v.driver, cuda) != "too-old":
        return []
    need = k.full_driver(cuda) or k.floor_driver(cuda)
    return [error(
        "dockerfile-base-cuda-newer",
        f"{d.get('path')}:{base.get('line')}: FROM {base.get('image')} needs a driver for CUDA {cuda}; this machine's "
        f"driver {v.driver} is older: 'nvidia-container-cli: requirement error: unsatisfied condition: cuda>={cuda}'",
        f"install NVIDIA driver ≥ {need}, or start FROM an image of a CUDA driver {v.driver} runs; or {INIT}",
    )]


CHECKS = (check_base, check_two_cudas, check_replaced, check_nvidia_env, check_unresolved, check_base_driver)
