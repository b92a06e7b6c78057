"""Which of a repository's requirement files make the training image, decided from their names, what they
include, their environment markers and their pins — and every other file's fate said in one line.

Repositories keep beside their core requirements files that are not part of it:
- variants for other work or hardware: dev/test/docs, a minimum-versions test set, TPU, ROCm, XPU, CPU;
- files for another platform (Windows, macOS: named so, or every line behind a marker that is false on Linux);
- optional extras: per-language files (``requirements.ja.txt``), notebooks and demos, a feature set beside a core;
- mutually exclusive alternatives: one file per backend of a multi-backend library (``requirements-torch-cuda.txt``,
  ``requirements-jax-cuda.txt``), per CUDA version (``requirements_cu118.txt``, ``requirements_cu128.txt``), a
  "stable stack" beside the core, or any file whose pins contradict another's.
The core is read; of a set of alternatives, the one that fits the request (``--framework``, ``--cuda``, a GPU over
a CPU image, Linux, the newest CUDA) is read and the others are named; a per-backend set with nothing to choose
by is refused by the caller with the flag that chooses (``--framework``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from envman.errors import UsageError
from envman.project.req import LINUX, holds
from envman.project.sources import Found
from envman.project.sources.requirements_txt import read_requirements

# name tokens (split on - _ .) and what they say about the file
_DEV = {"dev", "devel", "develop", "test", "tests", "testing", "doc", "docs", "lint", "ci", "style", "typing", "bench",
        "benchmark", "min", "minimal", "minimum", "lowest", "oldest", "build", "mypy", "pre"}
_HARDWARE = {"tpu", "rocm", "xpu", "npu", "mps", "ipex", "hpu", "habana", "neuron", "ascend", "directml", "dml", "amd",
             "intel", "openvino", "cpu", "onnx", "mlu", "musa"}
_PLATFORM = {"windows", "win", "win32", "win64", "mac", "macos", "osx", "darwin", "apple", "m1", "m2"}
_LANGUAGE = {"ja", "jp", "zh", "cn", "tw", "ko", "kr", "de", "fr", "es", "ru", "pt", "it", "vi", "th", "ar", "hi",
             "tr", "pl", "nl", "id", "uk", "fa", "he"}
_NOTEBOOK = {"notebook", "notebooks", "jupyter", "colab", "ipynb", "demo", "demos", "example", "examples", "tutorial",
             "tutorials", "viz", "visualization", "webui", "gui", "app", "gradio", "streamlit"}
_STABLE = {"stable", "frozen", "freeze", "pinned", "lock", "locked", "latest", "nightly", "exact"}
_BACKEND = {"torch": "torch", "pytorch": "torch", "pt": "torch", "pt2": "torch", "tf": "tensorflow",
            "tensorflow": "tensorflow", "keras": "tensorflow", "jax": "jax", "flax": "jax", "paddle": "paddle",
            "mxnet": "mxnet"}
_CORE = {"", "base", "main", "core", "common", "runtime", "install", "prod", "production", "default", "requirements",
         "train", "training", "deps", "dependencies", "linux", "docker", "gpu", "cuda"}
_CUDA = re.compile(r"^(?:cu|cuda)(\d{2,3})\Z")
_PY = re.compile(r"^py(?:thon)?3\.?(\d{1,2})\Z")
FEATURE_SET = "an optional feature set beside the core ({core}); name it under requirements: in envman.yaml to use it"
NAME_IT = "name it under requirements: in envman.yaml to use it"


def key_of(f: str) -> str:
    """``requirements-torch-cuda.txt`` → ``torch-cuda``; ``requirements/vllm.txt`` → ``vllm``."""
    stem = Path(f).stem
    if f.startswith("requirements/"):
        return "" if stem.lower() == "requirements" else re.sub(r"^requir[a-z]*[-_.]?", "", stem.lower())
    return re.sub(r"^requir[a-z]*[-_.]?|[-_.]?requir[a-z]*\Z", "", stem.lower())  # docker_requirements.txt → docker


def tokens(f: str) -> list[str]:
    return [t for t in re.split(r"[-_.\s]+", key_of(f)) if t]


@dataclass
class FileChoice:
    read: list[str] = field(default_factory=list)  # in reading order
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, or files joined by ", "; why)
    python: list[tuple[str, str]] = field(default_factory=list)  # (origin, "==3.12.*") from a py312 file name
    backends: list[str] = field(default_factory=list)  # a per-backend set the request could not choose from


@dataclass(frozen=True)
class Want:
    """What the request says a file must fit: the CLI's --framework / --cuda, a CPU image."""

    framework: str | None = None  # "torch" | "tensorflow"
    cuda: str | None = None  # "12.8"
    cpu: bool = False


def _skip_reason(f: str, want: Want) -> str | None:
    t = set(tokens(f))
    if t & _DEV:
        return f"a dev/test/docs/hardware variant; {NAME_IT}"
    hw = sorted(t & _HARDWARE - ({"cpu"} if want.cpu else set()))
    if hw:
        return f"a variant for other hardware ({', '.join(hw)}); {NAME_IT}"
    pl = sorted(t & _PLATFORM)
    if pl:
        return f"for another platform ({', '.join(pl)}): the image is Linux; {NAME_IT}"
    lang = sorted(t & _LANGUAGE)
    if lang and t <= _LANGUAGE:
        return f"a per-language extra ({lang[0]}); {NAME_IT}"
    nb = sorted(t & _NOTEBOOK)
    if nb and not t & _CORE - {""}:
        return f"notebooks, demos or a UI ({nb[0]}), optional for training; {NAME_IT}"
    return None


def _off_linux(found: Found) -> bool:
    """Every line of the file is behind a marker that is false on Linux (a Windows- or macOS-only file)."""
    markers = [r.req.marker for r in found.reqs if r.req.marker is not None]
    if not found.reqs or len(markers) < len(found.reqs):
        return False
    return not any(holds(m, LINUX) for m in markers)


def _pins(found: Found) -> dict[str, str]:
    return {r.name: str(r.req.specifier) for r in found.reqs if any(s.operator == "==" for s in r.req.specifier)
            and holds(r.req.marker, LINUX)}


def backends_of(f: str) -> list[str]:
    """The frameworks a file's name is for (``requirements-torch-cuda.txt`` → torch)."""
    return sorted({_BACKEND[t] for t in tokens(f) if t in _BACKEND})


def _cuda_of(toks: list[str]) -> int | None:
    return next((int(m.group(1)) for m in map(_CUDA.match, toks) if m), None)


def _rank(f: str, want: Want) -> tuple:
    """Higher is better: fits the asked framework, the asked CUDA, a GPU image (CUDA over CPU, newest CUDA), Linux."""
    toks = tokens(f)
    backend = next((_BACKEND[t] for t in toks if t in _BACKEND), None)
    cu = _cuda_of(toks)
    asked = int(want.cuda.replace(".", "")) if want.cuda and re.fullmatch(r"\d+\.\d", want.cuda) else None
    return (backend == want.framework if want.framework else 0,
            cu == asked if asked else 0,
            ("cuda" in toks or "gpu" in toks or cu is not None) if not want.cpu else "cpu" in toks,
            cu or 0, "linux" in toks or "docker" in toks, -len(toks), f)


def choose_files(root: Path, files: list[str], *, wanted: tuple[str, ...] = (), dynamic: list[str] | None = None,
                 core: str | None = None, want: Want = Want()) -> FileChoice:
    """``files``: the candidates (top-level requirement files and requirements/*.txt); ``dynamic``: the files
    pyproject's [tool.setuptools.dynamic] names (always read); ``core``: what states the core when a
    requirements/ folder holds feature sets (discover._core_elsewhere)."""
    fixed_names = set(wanted) | set(dynamic or [])
    out = FileChoice()
    founds = _read_all(root, files, fixed_names, out, want)
    fixed = [f for f in founds if f in fixed_names]
    kept = fixed + _not_skipped([f for f in founds if f not in fixed_names], founds, core, want, out)
    # a file read through another's -r is read with it; one included only by a skipped file stays a root
    included = {i for f in kept for i in founds[f].includes}
    rest = [f for f in kept if f not in included and f not in fixed]
    chosen = fixed + _choose_among(rest, founds, want, out)
    out.read = _without_clashes(chosen, fixed, founds, out)
    for f in out.read:
        m = next((_PY.match(t) for t in tokens(f) if _PY.match(t)), None)
        if m:
            out.python.append((f"{f} (its name)", f"==3.{m.group(1)}.*"))
    return out


def _read_all(root: Path, files: list[str], fixed: set[str], out: FileChoice, want: Want) -> dict[str, Found]:
    """Every candidate, read. A file that cannot be read is an error (one line naming it), unless its name already
    says it is not the training environment's (a dev or a Windows file): then it is skipped, said."""
    founds: dict[str, Found] = {}
    for f in files:
        try:
            founds[f] = read_requirements(root, f)
        except UsageError:
            if f in fixed or _skip_reason(f, want) is None:
                raise
            out.skipped.append((f, "cannot be read as a requirements file"))
    return founds


def _not_skipped(roots: list[str], founds: dict[str, Found], core: str | None, want: Want, out: FileChoice) -> list[str]:
    """The files left once variants for other work, hardware and platforms are skipped (each said), and a
    requirements/ folder's feature sets beside a core stated elsewhere (said in one line)."""
    features: list[str] = []
    rest: list[str] = []
    for f in roots:
        why = _skip_reason(f, want)
        if why is None and _off_linux(founds[f]):
            why = f"for another platform (every line's marker is false on Linux); {NAME_IT}"
        if why:
            out.skipped.append((f, why))
        elif core and f.startswith("requirements/") and f not in core.split(", ") and key_of(f) not in _CORE:
            features.append(f)
        else:
            rest.append(f)
    if features:
        out.skipped.append((", ".join(features), FEATURE_SET.format(core=core)))
    return rest


def _without_clashes(chosen: list[str], fixed: list[str], founds: dict[str, Found], out: FileChoice) -> list[str]:
    """A file whose pins contradict an earlier one's (a "stable stack" beside the core) is an alternative to it."""
    kept: list[str] = []
    for f in chosen:
        clash = next(((g, c) for g in kept if (c := _clash(founds, g, f))), None)
        if clash and f not in fixed:
            out.skipped.append((f, f"an alternative to {clash[0]}: its pins contradict it ({clash[1]}); {NAME_IT} instead"))
        else:
            kept.append(f)
    return kept


def _clash(founds: dict[str, Found], a: str, b: str) -> str | None:
    pa, pb = _pins(founds[a]), _pins(founds[b])  # -r includes merged in
    for name in sorted(set(pa) & set(pb)):
        if pa[name] != pb[name]:
            return f"{name}{pb[name]} vs {name}{pa[name]}"
    return None


def _is_core(f: str) -> bool:
    return key_of(f) == "" or set(tokens(f)) <= _CORE - {"linux", "docker", "gpu", "cuda"}


def _choose_among(rest: list[str], founds: dict[str, Found], want: Want, out: FileChoice) -> list[str]:
    """The core files and, of each set of alternatives, the one that fits; the others said. A file that
    includes a core file (``-r requirements.txt``) is a variant of the core, an alternative to its siblings."""
    core_files = {f for f in founds if _is_core(f)}
    cores = [f for f in rest if f in core_files]
    backend = [f for f in rest if f not in cores and any(t in _BACKEND for t in tokens(f))]
    if len({_BACKEND[t] for f in backend for t in tokens(f) if t in _BACKEND}) < 2:
        backend = []  # files of one backend only (requirements/pt2.txt): variants, not a choice between backends

    def is_variant(f: str) -> bool:
        t = set(tokens(f))
        return (_cuda_of(tokens(f)) is not None or bool(t & {"cuda", "gpu", "linux", "docker"} | t & _STABLE)
                or bool(t & set(_BACKEND)) or any(_PY.match(x) for x in t) or bool(core_files & set(founds[f].includes)))

    variant = [f for f in rest if f not in cores and f not in backend and is_variant(f)]
    features = [f for f in rest if f not in cores + backend + variant]
    chosen = cores + _choose_backend(backend, want, out)
    stable = [f for f in variant if set(tokens(f)) & _STABLE and _cuda_of(tokens(f)) is None]
    chosen += _choose_variant([f for f in variant if f not in stable], want, out)
    for f in stable:
        if chosen:
            out.skipped.append((f, f"an alternative pinned set beside {chosen[0]}; {NAME_IT} instead"))
        else:
            chosen.append(f)
    if features and not chosen:
        return features  # nothing else states the environment: the feature files are all there is
    if features:
        out.skipped.append((", ".join(features), FEATURE_SET.format(core=", ".join(chosen))))
    return chosen


def _choose_backend(backend: list[str], want: Want, out: FileChoice) -> list[str]:
    """One file per backend of a multi-backend project: --framework chooses; without it, the caller refuses."""
    if not backend:
        return []
    fits = [f for f in backend if want.framework and any(_BACKEND.get(t) == want.framework for t in tokens(f))]
    if not fits:
        out.backends = backend
        out.skipped.append((", ".join(backend), "per-backend alternatives of a multi-backend project; pass "
                            "--framework to choose one (e.g. --framework torch reads the torch file)"))
        return []
    pick = max(fits, key=lambda f: _rank(f, want))
    if others := [f for f in backend if f != pick]:
        out.skipped.append((", ".join(others), f"per-backend alternatives to {pick} (--framework "
                            f"{want.framework} chose it); {NAME_IT} instead"))
    return [pick]


def _choose_variant(variant: list[str], want: Want, out: FileChoice) -> list[str]:
    """Alternatives per CUDA version, platform or Python: the one that fits the request."""
    if not variant:
        return []
    pick = max(variant, key=lambda f: _rank(f, want))
    if others := [f for f in variant if f != pick]:
        how = ("the newest CUDA one is read for a GPU image; pass --cuda to choose" if _cuda_of(tokens(pick))
               else "the one that fits a Linux GPU image is read")
        out.skipped.append((", ".join(others), f"alternatives to {pick} ({how}), or {NAME_IT} instead"))
    return [pick]
