"""The doctor's host side: the matrix → Knowledge adapter (memoised on disk) and facts files.

Loading the matrix costs about 25 ms even from envman.matrix's JSON cache (importing packaging and
the model dominates), over a tenth of the doctor's whole run; this JSON loads in about 2 ms. The derived
Knowledge is saved under the user's cache directory, keyed by a hash of the matrix files' bytes and
envman's version: any edit to the data, or a new envman, misses the cache and reloads through
``load_matrix`` (which validates). A cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from envman import __version__, frameworks
from envman.errors import UsageError
from envman.files import write_atomic
from envman.portable.doctor.knowledge import (
    Build,
    ExtBuild,
    Feature,
    Knowledge,
    Release,
)
from envman.portable.facts.gather import FACTS_SCHEMA
from envman.resources import matrix_dir

FORMAT = 3  # bump when Knowledge.to_dict changes shape

if TYPE_CHECKING:  # the model pulls in packaging: only the cache-miss path needs it
    from envman.model import Matrix


def matrix_key(directory: Path) -> str | None:
    h = hashlib.sha256(f"{__version__}\0{FORMAT}\0".encode())
    files = sorted(glob.glob(str(directory / "*.yaml")))
    if not files:
        return None
    for f in files:
        try:
            h.update(os.path.basename(f).encode() + b"\0" + Path(f).read_bytes() + b"\0")
        except OSError:
            return None
    return h.hexdigest()[:24]


def load_knowledge(directory: Path | None = None, use_cache: bool = True) -> Knowledge:
    """Knowledge for the matrix in ``directory`` (default: envman's own). Raises what load_matrix raises.
    Kept on disk as JSON data under the matrix's key (envman/diskcache.py: a bad entry is a miss)."""
    from envman.diskcache import cached

    d = directory or matrix_dir()
    key = matrix_key(d) if use_cache else None

    def compute() -> dict:
        from envman.matrix.load import load_matrix

        return with_extensions(knowledge_from_matrix(load_matrix(d)), d).to_dict()

    if key is None:
        return Knowledge.from_dict(compute())
    return cached("knowledge", key, compute, Knowledge.from_dict)


def kit_files() -> dict[str, str]:
    """The doctor kit every image carries (image/kit.py) for envman's matrix. Its knowledge.json is kept on
    disk under the matrix's key (serializing it costs ~5 ms a run), and in memory for the process."""
    from envman.diskcache import cached
    from envman.image.kit import doctor_kit, knowledge_json

    key = matrix_key(matrix_dir())
    if key is None:
        return doctor_kit(knowledge_json(load_knowledge().to_dict()))
    if key not in _KIT_TEXT:
        _KIT_TEXT.clear()
        _KIT_TEXT[key] = cached("kit-knowledge", key, lambda: knowledge_json(load_knowledge().to_dict()), _text)
    return doctor_kit(_KIT_TEXT[key])


_KIT_TEXT: dict[str, str] = {}


def _text(data: object) -> str:
    """knowledge.json's text, as the cache holds it; anything else is a bad entry (a miss)."""
    if not isinstance(data, str) or not data.startswith("{"):
        raise ValueError("not knowledge.json's text")
    return data


def knowledge_from_matrix(m: Matrix) -> Knowledge:
    """The adapter: plain strings and tuples out of the validated Matrix model."""
    rels: dict[str, tuple[Release, ...]] = {}
    # builds installed through an extra named like them (jax[cuda13]): the framework's CUDA extras
    extras = {f.name: {e for e, _ in f.cuda_extras} for f in frameworks.registered()}
    for fw, lst in m.frameworks.items():
        rels[fw] = tuple(
            Release(
                fw, str(r.version), r.package, tuple(r.python), r.numpy_abi, r.pypi_default, tuple(r.companions),
                tuple(
                    Build(v.name, str(v.cuda) if v.cuda is not None else None, v.cudnn, v.nccl,
                          tuple(a.sm for a in v.archs), tuple(a.sm for a in v.ptx), v.index_url, _cudnn_floor(m, v),
                          v.name if v.name in extras.get(fw, ()) else None)
                    for v in r.variants
                ),
                tuple(r.extras),
            )
            for r in lst
        )
    return Knowledge(
        {c.label: str(c.min_driver) for c in m.cuda},
        {mj.major: str(mj.minor_compat_floor) for mj in m.cuda_majors},
        rels,
        m.digest,
        tuple(((b.max_cc.major, b.max_cc.minor), b.branch, str(b.last_driver)) for b in m.legacy_branches
              if b.last_driver is not None),
        toolkit_wheels=m.toolkit_wheels.names,
        gpu_floors=_gpu_floors(m),
        cuda_images=tuple((str(i.cuda), i.cudnn, i.ubuntu, i.python) for i in m.base_images.cuda),
    )


def _gpu_floors(m: Matrix) -> dict[str, tuple[str, str]]:
    """The GPUs whose floor is NVIDIA's supported-GPU list, by the product names (NVML's) they are listed as."""
    from envman.portable.doctor.knowledge import gpu_key

    out = {}
    for g in m.gpus:
        if g.listed is not None and g.min_driver == g.listed and g.min_driver_prov is not None:
            for name in (g.name, *g.aliases):
                if any(ch.isupper() for ch in name):  # product names, not the slugs people type
                    out[gpu_key(name)] = (str(g.min_driver), g.min_driver_prov.source)
    return out


EXTENSIONS_FILE = "extensions.yaml"


def with_extensions(k: Knowledge, directory: Path) -> Knowledge:
    """``k`` plus matrices/extensions.yaml (feature floors, PTX ISA per CUDA, packages' own CUDA builds).
    The file is optional; a malformed entry is a DataError naming file and path."""
    from envman.errors import DataError

    p = Path(directory) / EXTENSIONS_FILE
    if not p.exists():
        return k
    import yaml

    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    problems: list[str] = []

    def need(entry: dict, key: str, where: str) -> str:
        val = entry.get(key)
        if not isinstance(val, str) or not val:
            problems.append(f"{EXTENSIONS_FILE}: {where}.{key}: missing or not a quoted string")
            return ""
        return val

    features = []
    for i, f in enumerate(doc.get("features") or ()):
        where = f"features[{i}]"
        if not f.get("source"):
            problems.append(f"{EXTENSIONS_FILE}: {where}: no source")
        mc = need(f, "min_cc", where)
        asked = f.get("asked_by") or {}
        pkgs = tuple((str(p["name"]), str(p["version"]) if p.get("version") is not None else None)
                     for p in asked.get("packages") or ())
        cc = cast("tuple[int, int]", tuple(int(x) for x in mc.split("."))) if mc else (0, 0)
        features.append(Feature(need(f, "id", where), f.get("name") or f.get("id", ""), cc,
                                tuple(str(x) for x in asked.get("precision") or ()), pkgs,
                                f.get("fails", ""), f.get("instead", "")))
    ptx = {}
    for i, e in enumerate(doc.get("ptx_isa") or ()):
        if not e.get("source"):
            problems.append(f"{EXTENSIONS_FILE}: ptx_isa[{i}]: no source")
        ptx[need(e, "cuda", f"ptx_isa[{i}]")] = need(e, "isa", f"ptx_isa[{i}]")
    builds = []
    for i, b in enumerate(doc.get("builds") or ()):
        if not b.get("source"):
            problems.append(f"{EXTENSIONS_FILE}: builds[{i}]: no source")
        builds.append(ExtBuild(need(b, "package", f"builds[{i}]"), need(b, "from", f"builds[{i}]"),
                               need(b, "cuda", f"builds[{i}]"), b.get("cudnn")))
    tfw = doc.get("tensorflow_windows_native_gpu_last") or {}
    sonames, glibc, windows = _tables(doc, problems, need)
    lcuda = _triton_lcuda(doc, problems, need)
    if problems:
        raise DataError("; ".join(problems))
    return dataclasses.replace(k, features=tuple(features), ptx_isa=ptx, ext_builds=tuple(builds),
                               tf_windows_gpu_last=tfw.get("version") if isinstance(tfw, dict) else None,
                               cuda_sonames=sonames, wheel_glibc=glibc, windows_native=windows,
                               triton_lcuda_before=lcuda)


def _triton_lcuda(doc: dict, problems: list[str], need) -> str | None:
    """extensions.yaml triton_links_libcuda_so.before: the first Triton whose launcher links libcuda.so.1."""
    e = doc.get("triton_links_libcuda_so")
    if e is None:
        return None
    if not (isinstance(e, dict) and (e.get("source") or e.get("measured"))):
        problems.append(f"{EXTENSIONS_FILE}: triton_links_libcuda_so: expected a mapping with source or measured")
        return None
    return need(e, "before", "triton_links_libcuda_so") or None


def _tables(doc: dict, problems: list[str], need) -> tuple[tuple, tuple, tuple]:
    """cuda_sonames, wheel_glibc and windows_native of extensions.yaml, each row cited."""
    def cited(section: str) -> list[tuple[str, dict]]:
        rows = []
        for i, e in enumerate(doc.get(section) or ()):
            where = f"{section}[{i}]"
            if not isinstance(e, dict):
                problems.append(f"{EXTENSIONS_FILE}: {where}: expected a mapping")
                continue
            if not (e.get("source") or e.get("measured")):
                problems.append(f"{EXTENSIONS_FILE}: {where}: no source or measured")
            rows.append((where, e))
        return rows

    sonames = []
    for where, e in cited("cuda_sonames"):
        libs = e.get("libs")
        if not isinstance(libs, dict) or not all(isinstance(v, str) for v in libs.values()):
            problems.append(f"{EXTENSIONS_FILE}: {where}.libs: expected stem: \"soname version\" strings")
            continue
        sonames.append((need(e, "cuda", where), tuple(sorted((str(k), v) for k, v in libs.items()))))
    glibc = tuple((need(e, "package", w), need(e, "from", w), need(e, "glibc", w)) for w, e in cited("wheel_glibc"))
    windows = tuple((need(e, "package", w), need(e, "from", w)) for w, e in cited("windows_native"))
    return tuple(sonames), glibc, windows


# --- facts files: `--dump-facts FILE` writes one, `--facts FILE` judges one from another machine --------


def read_facts_file(path: str) -> dict:
    """The facts in ``path``; a missing, unreadable or malformed file is a UsageError naming it."""
    hint = "create it on the machine to diagnose with `envman doctor --dump-facts facts.json`"
    from envman.inputs import MAX_FACTS, load_json, read_input

    data = load_json(read_input(path, f"facts file {path}", MAX_FACTS, hint=hint), f"facts file {path}", hint=hint)
    if not isinstance(data, dict):
        raise UsageError(f"facts file {path}: expected a JSON object at the top, got {type(data).__name__}", hint=hint)
    schema = data.get("schema")
    if isinstance(schema, int) and schema > FACTS_SCHEMA:
        raise UsageError(f"facts file {path}: schema {schema} is newer than this envman reads ({FACTS_SCHEMA})",
                         hint="upgrade envman (pip install -U envman)")
    _validate_facts(data, f"facts file {path}", hint)
    return data


_VERSION = re.compile(r"^\d+(\.\d+){0,3}$")
_CC = re.compile(r"^\d+\.\d+$")


def _validate_facts(data: dict, label: str, hint: str) -> None:
    """A facts file is an input like any other: the fields the checks compare must hold what a probe writes
    (a driver `abc` or a capability `x.y` would otherwise read as "no problem")."""
    def bad(fld: str, value: object, want: str) -> UsageError:
        return UsageError(f"{label}: {fld}: {value!r} is not {want}", hint=hint)

    for fld, pattern, want in (("driver", _VERSION, "a driver version like 550.54.15"),
                               ("driver_cuda", _CC, "a CUDA version like 12.4")):
        v = data.get(fld)
        if v is not None and not (isinstance(v, str) and pattern.match(v)):
            raise bad(fld, v, want)
    gpus = data.get("gpus")
    if gpus is None:
        return
    if not isinstance(gpus, list):
        raise bad("gpus", gpus, "a list of GPUs")
    for i, g in enumerate(gpus):
        if not isinstance(g, dict):
            raise bad(f"gpus[{i}]", g, "an object")
        cc = g.get("cc")
        if cc is not None and not (isinstance(cc, str) and _CC.match(cc)):
            raise bad(f"gpus[{i}].cc", cc, "a compute capability like 8.0")
        if g.get("name") is not None and not isinstance(g.get("name"), str):
            raise bad(f"gpus[{i}].name", g.get("name"), "a string")


def write_facts_file(path: str, facts: dict) -> None:
    write_atomic(path, json.dumps(facts, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _cudnn_floor(m: Matrix, v) -> tuple[int, int] | None:
    """The lowest capability the variant's cuDNN supports, when the matrix is sure of it."""
    dnn = m.cudnn_release(v.cudnn) if v.cuda is not None else None
    cc = dnn.floor_for(v.cuda.major) if dnn is not None and not dnn.prov.uncertain else None
    return (cc.major, cc.minor) if cc is not None else None


# --- the use case: ``envman doctor`` -------------------------------------------------------------------


@dataclass(frozen=True)
class DoctorReport:
    """The judged facts: findings sorted as the report shows them. The CLI prints it and picks the exit code."""

    facts: dict
    findings: tuple  # of portable.doctor.findings.Finding

    @property
    def has_errors(self) -> bool:
        from envman.portable.doctor.findings import ERROR

        return any(f.severity == ERROR for f in self.findings)

    @property
    def has_warnings(self) -> bool:
        from envman.portable.doctor.findings import WARN

        return any(f.severity == WARN for f in self.findings)

    def text(self) -> str:
        from envman.portable.doctor.report import render_text

        return render_text(list(self.findings), self.facts)

    def to_json(self) -> dict:
        from envman.portable.doctor.report import report_dict

        return report_dict(list(self.findings), self.facts)


def check_doctor_args(path: str = ".", *, facts_file: str | None = None, python: str | None = None,
                      deep: bool = False) -> None:
    """A UsageError for options that contradict each other or name nothing."""
    import shutil

    if facts_file is not None and (deep or python):
        raise UsageError(
            f"--facts judges a recorded file; {'--deep' if deep else '--python'} probes this machine",
            hint="drop it, or run `envman doctor --deep --dump-facts facts.json` on the machine the facts "
            "came from",
        )
    if python is not None and not (os.path.exists(python) or shutil.which(python)):
        raise UsageError(f"--python {python}: not found",
                         hint="pass the interpreter of the environment to examine, e.g. --python .venv/bin/python")
    if facts_file is None and not os.path.isdir(path):
        raise UsageError(f"project directory {path}: not found", hint="pass the project's directory (default: .)")


def _gather(path: str, facts_file: str | None, python: str | None, deep: bool) -> dict:
    if facts_file is not None:
        return read_facts_file(facts_file)
    from envman.portable.facts.gather import gather_facts

    facts = gather_facts(path, python=python, deep=deep, envman_version=__version__)
    fit = _workload_fit(path)
    if fit is not None:
        facts["workload_fit"] = fit
    return facts


def _workload_fit(path: str) -> dict | None:
    """envman.yaml's workload as the per-GPU peak `envman fit` estimates (host only: no estimator in images)."""
    from envman.errors import EnvmanError
    from envman.project.spec import load_spec

    try:
        spec = load_spec(Path(path))
    except EnvmanError:
        return None  # a broken envman.yaml is the lock checks' finding, not this one's
    if spec is None or not spec.workload:
        return None
    from envman.app.workload import workload_fact

    return workload_fact(spec.workload, path)


def collect_facts(path: str = ".", *, facts_file: str | None = None, python: str | None = None,
                  deep: bool = False) -> dict:
    """This machine's facts (probes with timeouts), or those recorded in ``facts_file``."""
    check_doctor_args(path, facts_file=facts_file, python=python, deep=deep)
    return _gather(path, facts_file, python, deep)


def _load_knowledge(out: dict) -> None:
    from envman.errors import EnvmanError

    try:
        out["knowledge"] = load_knowledge()
    except EnvmanError as err:
        out["error"] = err.message
    except Exception as exc:  # noqa: BLE001 - the doctor still judges what needs no matrix
        out["error"] = f"{type(exc).__name__}: {exc}"


def judge_facts(facts: dict, knowledge: Knowledge | None, knowledge_error: str | None = None) -> DoctorReport:
    """The pure checks on ``facts``; without knowledge, a matrix-unavailable warning and the checks that need none."""
    from envman.portable.doctor.checks import run_checks, sort_findings
    from envman.portable.doctor.findings import warn

    findings = run_checks(facts, knowledge)
    if knowledge_error:
        findings = sort_findings([warn(
            "matrix-unavailable",
            f"envman's compatibility data cannot be loaded ({knowledge_error}): checks that need it are skipped",
            "reinstall envman, or fix the matrix file named above",
        )] + findings)
    return DoctorReport(facts, tuple(findings))


def run_doctor(path: str = ".", *, facts_file: str | None = None, python: str | None = None, deep: bool = False,
               dump_facts: str | None = None) -> DoctorReport:
    """Gather (or read) the facts, write them to ``dump_facts`` when asked, and judge them."""
    import threading

    check_doctor_args(path, facts_file=facts_file, python=python, deep=deep)
    # Knowledge (cached JSON, else the matrix) loads while the probes wait on subprocesses and the kernel.
    kn: dict = {}
    loader = threading.Thread(target=_load_knowledge, args=(kn,), daemon=True)
    loader.start()
    facts = _gather(path, facts_file, python, deep)
    if dump_facts:
        try:
            write_facts_file(dump_facts, facts)
        except OSError as exc:
            raise UsageError(f"cannot write {dump_facts}: {exc.strerror or exc}",
                             hint="choose a writable path for --dump-facts") from None
    loader.join()
    return judge_facts(facts, kn.get("knowledge"), kn.get("error"))


# --- ``envman doctor --dockerfile PATH``: a Dockerfile someone wrote, judged before it is built ----------------


@dataclass(frozen=True)
class DockerfileReport:
    """One Dockerfile's verdicts: the facts its image would have and the findings on them."""

    path: str
    targets: str  # which GPUs it was judged for, and where they came from
    report: DoctorReport

    def to_json(self) -> dict:
        return {"path": self.path, "targets": self.targets, **self.report.to_json()}


def dockerfile_paths(paths: list[str]) -> list[Path]:
    """The Dockerfiles named: a file as it is; a directory (a project) its own Dockerfiles, not those envman wrote."""
    from envman.portable.facts.project import read_dockerfiles

    out: list[Path] = []
    for p in paths:
        q = Path(p)
        if q.is_dir():
            found = [q / d["path"] for d in read_dockerfiles(str(q))]
            out += [f for f in found if not _generated_by_envman(f)]
            if not found:
                raise UsageError(f"--dockerfile {p}: no Dockerfile in this directory",
                                 hint="name the file: envman doctor --dockerfile path/to/Dockerfile")
        else:
            out.append(q)
    return out


def _generated_by_envman(path: Path) -> bool:
    from envman.inputs import read_regular

    try:
        return b"generated by envman" in read_regular(path)[:512]
    except OSError:
        return False


def dockerfile_targets(project: str, targets: list[str]) -> tuple[list[dict], str, dict]:
    """(gpu facts, where they came from, machine facts): --target, else envman.yaml's targets, else this machine's
    GPUs (with its driver)."""
    names, source = list(targets), "--target"
    if not names:
        from envman.errors import EnvmanError
        from envman.project.spec import load_spec

        try:
            spec = load_spec(Path(project))
        except EnvmanError:
            spec = None
        if spec is not None and spec.targets:
            names, source = list(spec.targets), "envman.yaml targets"
    if names:
        from envman.matrix.load import load_matrix
        from envman.resolve.targets import parse_target
        from envman.resources import matrix_dir

        m = load_matrix(matrix_dir())
        gpus = []
        for i, n in enumerate(names):
            t = parse_target(m, n)
            gpus.append({"index": i, "name": t.gpu.name if t.gpu else t.label, "cc": f"{t.cc.major}.{t.cc.minor}"})
        return gpus, f"{', '.join(names)} ({source})", {}
    from envman.portable.facts.nvidia import probe_nvidia

    machine = probe_nvidia()
    gpus = [g for g in machine.get("gpus") or [] if isinstance(g, dict)]
    label = ", ".join(f"{g.get('name')}" for g in gpus) or "no GPU"
    return gpus, f"{label} (this machine)", machine


def run_dockerfile_doctor(paths: list[str], *, project: str = ".", targets: list[str] | None = None) -> list[DockerfileReport]:
    """Each Dockerfile read statically into the facts its image would have, judged by the doctor's checks for the
    target GPUs. Raises UsageError for a file that cannot be read."""
    from envman.inputs import MAX_SPEC, read_input
    from envman.portable.dockerfile import parse_dockerfile
    from envman.portable.doctor.checks import run_checks
    from envman.portable.doctor.dockerfile_facts import dockerfile_facts

    files = dockerfile_paths(paths)
    gpus, where, machine = dockerfile_targets(project, list(targets or ()))
    k = load_knowledge()
    out = []
    for f in files:
        text = read_input(f, f"Dockerfile {f}", MAX_SPEC, hint="pass the path of a Dockerfile")
        context = [f.parent, Path(project)]

        def read(name: str, context: list[Path] = context) -> str | None:
            for d in context:  # a -r file is COPY'd from the build context: look it up by its name there
                p = d / Path(name).name
                if p.is_file():
                    try:
                        return read_input(p, f"requirements file {p}", MAX_SPEC)
                    except UsageError:
                        return None
            return None

        facts = dockerfile_facts(parse_dockerfile(text), k, gpus, path=str(f), read=read, machine=machine)
        findings = [dataclasses.replace(x, verdict=f"{f}: {x.verdict}") if not x.check.startswith("dockerfile-")
                    else x for x in run_checks(facts, k)]
        out.append(DockerfileReport(str(f), where, DoctorReport(facts, tuple(findings))))
    return out
