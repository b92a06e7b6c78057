"""PURE: a parsed Dockerfile read as the facts its image would have, for the same checks as a machine."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..versions import major, major_minor, vcmp, vt
from .knowledge import Knowledge, Release
from .view import norm_name as norm

_CUDA_IMG = re.compile(r"(?:^|/)nvidia/cuda:(\d+\.\d+)(?:\.\d+)?(?:-cudnn(\d*))?-(base|runtime|devel)-([a-z]+)(\d+(?:\.\d+)?)")
_TORCH_IMG = re.compile(r"(?:^|/)pytorch/pytorch:(\d+\.\d+\.\d+)-cuda(\d+\.\d+)-cudnn(\d+)-(runtime|devel)")
_TF_IMG = re.compile(r"(?:^|/)tensorflow/tensorflow:(\d+\.\d+\.\d+)(-gpu)?")
_PY_IMG = re.compile(r"(?:^|/)python:(\d+\.\d+)")
_NGC = re.compile(r"nvcr\.io/nvidia/(pytorch|tensorflow):(\d+\.\d+)")
_DISTRO = re.compile(r"(?:^|/)(ubuntu|debian):(\S+)")
# a third party's torch image that names its torch and CUDA in the tag (hiyouga/pytorch:th2.6.0-cu124-…)
_NAMED_TORCH = re.compile(r"[:_-](?:th|torch|pytorch)-?(\d+\.\d+\.\d+)[-_]cu(?:da)?-?(\d{3}|\d+\.\d+)(?![\d.])")
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;#@]*)")
_SPEC = re.compile(r"(===|==|!=|~=|>=|<=|>|<)\s*([\w.*+!-]+)")
# download.pytorch.org/whl/cu121, /whl/nightly/cu118, -f /whl/cu111/torch_stable.html: the variant of the index
_INDEX_VARIANT = re.compile(r"/whl/(?:nightly/|test/)?(cu\d+|cpu|rocm[\d.]+)(?:/|/torch_stable\.html)?\Z")
_FRAMEWORKS = {"torch": "torch", "tensorflow": "tensorflow", "tensorflow-gpu": "tensorflow",
               "tensorflow-cpu": "tensorflow", "tf-nightly": "tensorflow"}  # distribution -> framework
SOURCE_BUILDS = ("flash-attn", "apex", "mamba-ssm", "causal-conv1d", "deepspeed")
# NVIDIA's images (and those built FROM them) set these, so the container toolkit injects the GPUs
_NVIDIA_ENV = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}


def satisfies(version: str, spec: str) -> bool:
    """PEP 440 specifiers on release numbers (==2.1.*, >=2.0,<2.3, ~=2.1): enough to pick a framework release."""
    for op, want in _SPEC.findall(spec or ""):
        if want.endswith(".*"):
            prefix = vt(want[:-2])
            ok = vt(version)[:len(prefix)] == prefix
            if (op == "==" and not ok) or (op == "!=" and ok):
                return False
            continue
        c = vcmp(version, want)
        if op == "~=":
            head = vt(want)[:-1]
            if c < 0 or vt(version)[:len(head)] != head:
                return False
        elif not {"==": c == 0, "===": c == 0, "!=": c != 0, ">=": c >= 0, "<=": c <= 0, ">": c > 0, "<": c < 0}[op]:
            return False
    return True


def read_base(image: str, k: Knowledge) -> dict[str, Any]:
    """What the tag of a base image says: {image, kind, cuda, cudnn, flavor, python, framework}."""
    b: dict[str, Any] = {"image": image, "kind": "unknown"}
    ubuntu_python = {u: py for _c, _d, u, py in k.cuda_images}
    if m := _CUDA_IMG.search(image):
        cuda, dnn, flavor, distro, ver = m.groups()
        if dnn == "" and "-cudnn" in image:  # "cudnn" without a number: the cuDNN NVIDIA's table gives that CUDA
            dnn = next((d for c, d, _u, _p in k.cuda_images if c == cuda), None) or "9"
        b.update(kind="cuda", cuda=cuda, cudnn=dnn or None, flavor=flavor,
                 python=ubuntu_python.get(ver) if distro == "ubuntu" else None, distro=f"{distro}{ver}")
    elif m := _TORCH_IMG.search(image):
        b.update(kind="pytorch", cuda=m.group(2), cudnn=m.group(3), flavor=m.group(4),
                 framework={"name": "torch", "version": m.group(1), "cuda": m.group(2)})
    elif m := _TF_IMG.search(image):
        b.update(kind="tensorflow", framework={"name": "tensorflow", "version": m.group(1), "gpu": bool(m.group(2))})
    elif m := _PY_IMG.search(image):
        b.update(kind="python", python=m.group(1))
    elif m := _NGC.search(image):
        b.update(kind="ngc", release=m.group(2), framework={"name": {"pytorch": "torch"}.get(m.group(1), m.group(1))})
    elif m := _NAMED_TORCH.search(image):
        cuda = m.group(2) if "." in m.group(2) else f"{m.group(2)[:-1]}.{m.group(2)[-1]}"
        b.update(kind="named", cuda=cuda, uncertain=True,
                 framework={"name": "torch", "version": m.group(1), "cuda": cuda})
    elif m := _DISTRO.search(image):
        b.update(kind="distro", distro=f"{m.group(1)}{m.group(2)}",
                 python=ubuntu_python.get(m.group(2)) if m.group(1) == "ubuntu" else None)
    return b


def _requirement_lines(inst: dict[str, Any], read: Callable[[str], str | None],
                       unread: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(requirement strings, index URLs) of one pip command: its arguments and the files it names with -r (those
    that cannot be read go to ``unread``)."""
    reqs = list(inst.get("packages") or ())
    indexes = [u for u in [inst.get("index_url"), *(inst.get("extra_index_urls") or ()), *(inst.get("find_links") or ())]
               if u]
    for f in inst.get("requirements") or ():
        text = read(f)
        if text is None:
            unread.append({"file": f, "line": inst["line"]})
        for line in (text or "").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith(("--index-url", "-i ", "--extra-index-url")):
                indexes.append(line.split()[-1].split("=")[-1])
            elif line and not line.startswith(("#", "-")):
                reqs.append(line)
    return reqs, indexes


def _pick(k: Knowledge, fw: str, spec: str, python: str | None, variant: str | None = None) -> Release | None:
    """The release pip picks: the newest that satisfies ``spec``, has wheels for ``python`` and, from a variant's own
    index (…/whl/cu118), a build of that variant."""
    return next((r for r in k.releases.get(fw, ()) if satisfies(r.version, spec)
                 and (not python or not r.python or python in r.python)
                 and (not variant or r.build(variant) is not None)), None)


class _Image:
    """The image being read, one install at a time."""

    def __init__(self, base: dict[str, Any], k: Knowledge):
        self.k, self.base = k, base
        self.python: str | None = base.get("python")
        self.pip: dict[str, str] = {}
        self.frameworks: dict[str, dict[str, Any]] = {}
        self.pins: dict[str, dict[str, str]] = {}
        self.unresolved: list[dict[str, Any]] = []
        self.intent: list[dict[str, str]] = []
        self.replaced: list[dict[str, Any]] = []
        self.unread: list[dict[str, Any]] = []
        self.companions = {c for name in k.releases for c in k.companion_names(name)}
        fw = base.get("framework")
        if fw and fw.get("version"):
            self._set(fw["name"], fw["version"], fw.get("cuda"), None, base.get("line", 0), from_base=True)

    def _set(self, fw: str, version: str, cuda: str | None, variant: str | None, line: int, *,
             from_base: bool = False, extras: str = "", package: str = "") -> None:
        before = self.frameworks.get(fw)
        rec: dict[str, Any] = {"version": version, "line": line, "from_base": from_base, "cuda": cuda,
                               "variant": variant, "wheels": not from_base and (fw == "torch" or "and-cuda" in extras)}
        if fw == "tensorflow":
            rec["package"] = package or "tensorflow"
        if before and before["from_base"] and not from_base and (before["version"] != version or before.get("cuda") != cuda):
            self.replaced.append({"name": fw, "old": before["version"], "old_cuda": before.get("cuda"), "new": version,
                                  "new_cuda": cuda, "line": line})
        self.frameworks[fw] = rec
        self.pip[fw if fw != "tensorflow" else rec["package"]] = version

    def pip_install(self, inst: dict[str, Any], read: Callable[[str], str | None]) -> None:
        reqs, indexes = _requirement_lines(inst, read, self.unread)
        variant = next((m.group(1) for u in indexes if (m := _INDEX_VARIANT.search(u))), None)
        for r in reqs:
            m = _REQ.match(r)
            if not m:
                continue
            name, extras, spec = norm(m.group(1)), m.group(2) or "", m.group(3).strip()
            fw = _FRAMEWORKS.get(name)
            if fw:
                self._install_framework(fw, name, extras, spec, variant, inst["line"])
                continue
            if name in SOURCE_BUILDS:
                self.intent.append({"package": name, "file": f"Dockerfile:{inst['line']}", "line": r})
            pin = re.fullmatch(r"==\s*([\w.+-]+)", spec)
            got = pin.group(1) if pin else self.pip.get(name, "")
            if pin and variant and "+" not in got and name in self.companions:
                got += f"+{variant}"  # torchvision==0.16.2 from …/whl/cu118 is the +cu118 build, as torch is
            self.pip[name] = got

    def _install_framework(self, fw: str, name: str, extras: str, spec: str, variant: str | None, line: int) -> None:
        pin = re.fullmatch(r"==\s*([\w.+!-]+)", spec)
        if pin:
            self.pins[fw] = {"version": pin.group(1).split("+")[0], "file": f"Dockerfile:{line}"}
            variant = variant or (pin.group(1).split("+", 1)[1] if "+" in pin.group(1) else None)
        bare = re.sub(r"\+[\w.]+", "", spec)
        rel = _pick(self.k, fw, bare, self.python, variant if fw == "torch" else None)
        if rel is None and pin and self.k.release(fw, pin.group(1)) is None:
            # a release envman's matrix does not know (older, newer): what it is, without its data (not-in-matrix)
            cuda = f"{variant[2:-1]}.{variant[-1]}" if variant and re.fullmatch(r"cu\d{3,}", variant) else None
            self._set(fw, pin.group(1).split("+")[0] + (f"+{variant}" if variant else ""), cuda, variant, line,
                      extras=extras, package=name)
            return
        if rel is None:
            known = _pick(self.k, fw, bare, None) is not None  # a release in range, none with this Python's wheels
            if not pin:
                self.unresolved.append({"name": name, "spec": spec or "(any)", "python": self.python, "line": line,
                                        "in_matrix": known})
            return  # (a pin without wheels for this Python: check_pin_python says it from `pins`)
        build = rel.build(variant) if variant else rel.build(rel.pypi_default)
        if fw == "tensorflow":
            gpu = "and-cuda" in extras and name == "tensorflow"
            b = next((x for x in rel.builds if not x.is_cpu), None) if name != "tensorflow-cpu" else None
            self._set(fw, rel.version, b.cuda if b else None, None, line, extras=extras, package=name)
            self.frameworks[fw]["is_cuda_build"] = name != "tensorflow-cpu"
            if gpu and b is not None:
                self._cuda_wheels(b.cuda, b.cudnn, every=True)
            return
        label = f"+{variant}" if variant else ""
        self._set(fw, rel.version + label, build.cuda if build else None, variant, line)
        if build is not None and not build.is_cpu:
            self._cuda_wheels(build.cuda, build.cudnn)

    def _cuda_wheels(self, cuda: str | None, cudnn: str | None, every: bool = False) -> None:
        """The nvidia-* wheels a CUDA framework wheel pulls in (its runtime and cuDNN, by CUDA major); ``every``: also
        the math libraries (tensorflow[and-cuda] names each one), numbered as their sonames are for that CUDA."""
        cm = major(cuda)
        if cm is None:
            return
        self.pip[f"nvidia-cuda-runtime-cu{cm}"] = str(cuda)
        if cudnn:
            self.pip[f"nvidia-cudnn-cu{cm}"] = cudnn
        if every:
            for stem, so in self.k.sonames(cuda).items():
                if stem not in ("libcudart", "libcublasLt"):
                    self.pip[f"nvidia-{stem[3:]}-cu{cm}"] = so if "." in so else f"{so}.0"

    def conda_install(self, inst: dict[str, Any]) -> None:
        pkgs = {norm(p.split("=")[0]): (p.split("=", 1)[1].lstrip("=") if "=" in p else "") for p in inst["packages"]}
        if "pytorch" in pkgs:
            cuda = pkgs.get("pytorch-cuda") or pkgs.get("cudatoolkit") or None
            rel = _pick(self.k, "torch", f"=={pkgs['pytorch']}.*" if pkgs["pytorch"] else "", self.python)
            if rel is not None:
                cpu = "cpuonly" in pkgs
                self._set("torch", rel.version, None if cpu else major_minor(cuda) if cuda else None,
                          "cpu" if cpu else None, inst["line"])
            else:
                self.unresolved.append({"name": "pytorch", "spec": pkgs["pytorch"] or "(any)", "python": self.python,
                                        "line": inst["line"]})

    def apt_install(self, inst: dict[str, Any]) -> None:
        """apt-get install python3.11: that Python (python3 is the distro's, already known from the base)."""
        for p in inst["packages"]:
            m = re.fullmatch(r"python(3\.\d+)", p)
            if m:
                self.python = m.group(1)


def _stages(parsed: dict[str, Any]) -> list[dict[str, Any]]:
    """The final stage and the stages it is built on, root first."""
    stages = parsed.get("stages") or []
    if not stages:
        return []
    chain = [stages[-1]]
    while chain[0].get("parent"):
        parent = next((s for s in stages if s.get("name") == chain[0]["parent"]), None)
        if parent is None or parent in chain:
            break
        chain.insert(0, parent)
    return chain


def dockerfile_facts(parsed: dict[str, Any], k: Knowledge, gpus: list[dict[str, Any]], *, path: str = "Dockerfile",
                     read: Callable[[str], str | None] = lambda _p: None,
                     machine: dict[str, Any] | None = None) -> dict[str, Any]:
    """The facts the image this Dockerfile builds would have, judged for ``gpus`` (gpu facts: index, name, cc) on
    ``machine`` (its driver facts, when the GPUs are this machine's)."""
    chain = _stages(parsed)
    if not chain:
        return {"schema": 1, "dockerfile": {"path": path, "error": "no FROM line"}}
    base = read_base(chain[0]["image"], k)
    base["line"] = chain[0]["line"]
    img = _Image(base, k)
    for st in chain:
        for inst in st["installs"]:
            getattr(img, {"pip": "pip_install", "conda": "conda_install", "apt": "apt_install"}[inst["tool"]])(
                *((inst, read) if inst["tool"] == "pip" else (inst,)))
    return _facts(img, base, chain, gpus, path, machine or {})


def _facts(img: _Image, base: dict[str, Any], chain: list[dict[str, Any]], gpus: list[dict[str, Any]], path: str,
           machine: dict[str, Any]) -> dict[str, Any]:
    env = dict(_NVIDIA_ENV) if base["kind"] in ("cuda", "pytorch", "ngc") or (
        base["kind"] == "tensorflow" and (base.get("framework") or {}).get("gpu")) else {}
    env.update(chain[-1]["env"])
    f: dict[str, Any] = {"schema": 1, "gpus": gpus, "pip": img.pip, "env": env, "build_intent": img.intent}
    f.update({k: machine[k] for k in ("driver", "driver_cuda") if machine.get(k)})
    if img.python:
        f["python"] = {"version": img.python, "bits": 64}
    if img.pins:
        f["pins"] = img.pins
    for fw, rec in img.frameworks.items():
        f[fw] = {k: v for k, v in rec.items() if v is not None and k not in ("line", "from_base", "wheels")}
    if "numpy" in img.pip and img.pip["numpy"]:
        f["numpy"] = img.pip["numpy"]
    cuda = base.get("cuda")
    if base["kind"] in ("cuda", "pytorch") and cuda:
        libs = {} if base.get("flavor") == "base" else dict(img.k.sonames(cuda))
        libs["libcudart"] = img.k.sonames(cuda).get("libcudart", str(major(cuda)))
        if base.get("cudnn"):
            libs["libcudnn"] = str(base["cudnn"])
        f["cuda_libs"] = [{"dir": f"/usr/local/cuda-{cuda}/lib64", "from": "system", "libs": libs}]
        devel = base.get("flavor") == "devel"
        f["nvcc"] = {"path": "/usr/local/cuda/bin/nvcc", "toolkit": f"/usr/local/cuda-{cuda}", "version": cuda,
                     "distro": False} if devel else None
        f["cuda_home"] = {"path": "/usr/local/cuda", "source": "/usr/local/cuda", "nvcc_version": cuda} if devel else None
    elif base["kind"] in ("python", "distro"):
        f["nvcc"] = f["cuda_home"] = None
        f["cuda_libs"] = []
    f["dockerfile"] = {
        "path": path, "base": base, "stages": len(chain), "env": env,
        "frameworks": {fw: {k: rec[k] for k in ("version", "cuda", "line", "from_base", "wheels")} for fw, rec in
                       img.frameworks.items()},
        "replaced": img.replaced, "unresolved": img.unresolved, "unread": img.unread,
    }
    return f
