"""``envman doctor``: this machine's facts (or a facts file) judged by the island's pure checks."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envman import __version__
from envman.errors import UsageError
from envman.files import write_atomic
from envman.portable.doctor.findings import ERROR, WARN
from envman.portable.doctor.report import render_text, report_dict
from envman.portable.facts.gather import FACTS_SCHEMA

if TYPE_CHECKING:
    from envman.portable.doctor.knowledge import Knowledge
    from envman.project.spec import ProjectSpec


@dataclass(frozen=True)
class DoctorReport:
    """The judged facts: findings sorted as the report shows them. The CLI prints it and picks the exit code."""

    facts: dict
    findings: tuple  # of portable.doctor.findings.Finding

    @property
    def has_errors(self) -> bool:
        return any(f.severity == ERROR for f in self.findings)

    @property
    def has_warnings(self) -> bool:
        return any(f.severity == WARN for f in self.findings)

    def text(self) -> str:
        return render_text(list(self.findings), self.facts)

    def to_json(self) -> dict:
        return report_dict(list(self.findings), self.facts)


def run_doctor(path: str = ".", *, facts_file: str | None = None, python: str | None = None, deep: bool = False,
               dump_facts: str | None = None) -> DoctorReport:
    """Gather (or read) the facts, write them to ``dump_facts`` when asked, and judge them."""
    import threading

    # Knowledge (cached JSON, else the matrix) loads while the probes wait on subprocesses and the kernel.
    kn: dict = {}
    loader = threading.Thread(target=_load_knowledge, args=(kn,), daemon=True)
    loader.start()
    facts = collect_facts(path, facts_file=facts_file, python=python, deep=deep)
    if dump_facts:
        try:
            write_atomic(dump_facts, json.dumps(facts, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write {dump_facts}: {exc.strerror or exc}",
                             hint="choose a writable path for --dump-facts") from None
    loader.join()
    return judge_facts(facts, kn.get("knowledge"), kn.get("error"))


def check_doctor_args(path: str = ".", *, facts_file: str | None = None, python: str | None = None,
                      deep: bool = False) -> None:
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


def collect_facts(path: str = ".", *, facts_file: str | None = None, python: str | None = None,
                  deep: bool = False) -> dict:
    """This machine's facts (probes with timeouts), or those recorded in ``facts_file``."""
    check_doctor_args(path, facts_file=facts_file, python=python, deep=deep)
    if facts_file is not None:
        return read_facts_file(facts_file)
    from envman.portable.facts.gather import gather_facts

    facts = gather_facts(path, python=python, deep=deep, envman_version=__version__)
    fit = _workload_fit(path)
    if fit is not None:
        facts["workload_fit"] = fit
    return facts


def project_spec(path: str) -> ProjectSpec | None:
    """The project's envman.yaml, or None when it has none or a broken one (not the doctor's finding)."""
    from envman.errors import EnvmanError
    from envman.project.spec import load_spec

    try:
        return load_spec(Path(path))
    except EnvmanError:
        return None


def _workload_fit(path: str) -> dict | None:
    """envman.yaml's workload as the per-GPU peak `envman fit` estimates (host only: no estimator in images)."""
    spec = project_spec(path)
    if spec is None or not spec.workload:
        return None
    from envman.app.workload import workload_fact

    return workload_fact(spec.workload, path)


def _load_knowledge(out: dict) -> None:
    from envman.errors import EnvmanError
    from envman.matrix.knowledge import load_knowledge

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


# --- facts files: `--dump-facts FILE` writes one, `--facts FILE` judges one from another machine --------


def read_facts_file(path: str) -> dict:
    """The facts in ``path``; a missing, unreadable or malformed file is a UsageError naming it."""
    hint = "create it on the machine to diagnose with `envman doctor --dump-facts facts.json`"
    from envman.inputs import MAX_FACTS, load_json, plain_numbers, read_input

    data = load_json(read_input(path, f"facts file {path}", MAX_FACTS, hint=hint), f"facts file {path}", hint=hint,
                     numbers_as_written=True)
    if not isinstance(data, dict):
        raise UsageError(f"facts file {path}: expected a JSON object at the top, got {type(data).__name__}", hint=hint)
    schema = data.get("schema")
    if isinstance(schema, int) and schema > FACTS_SCHEMA:
        raise UsageError(f"facts file {path}: schema {schema} is newer than this envman reads ({FACTS_SCHEMA})",
                         hint="upgrade envman (pip install -U envman)")
    _validate_facts(data, f"facts file {path}", hint)
    return plain_numbers(data)


def _as_written(holder: dict, fld: str) -> object:
    """A version written as a JSON number (``"cc": 8.0``) is read as the text it was written as: the same
    value a probe writes as a string."""
    v = holder.get(fld)
    if isinstance(v, float) and not isinstance(v, bool) and hasattr(v, "written"):
        holder[fld] = v = v.written
    return v


_VERSION = re.compile(r"^\d+(\.\d+){0,3}\Z")
_CC = re.compile(r"^\d+\.\d+\Z")


def _validate_facts(data: dict, label: str, hint: str) -> None:
    """A facts file is an input like any other: the fields the checks compare must hold what a probe writes
    (a driver `abc` or a capability `x.y` would otherwise read as "no problem")."""
    def bad(fld: str, value: object, want: str) -> UsageError:
        return UsageError(f"{label}: {fld}: {value!r} is not {want}", hint=hint)

    for fld, pattern, want in (("driver", _VERSION, "a driver version like 550.54.15"),
                               ("driver_cuda", _CC, "a CUDA version like 12.4")):
        v = _as_written(data, fld)
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
        cc = _as_written(g, "cc")
        if cc is not None and not (isinstance(cc, str) and _CC.match(cc)):
            raise bad(f"gpus[{i}].cc", cc, "a compute capability like 8.0")
        if g.get("name") is not None and not isinstance(g.get("name"), str):
            raise bad(f"gpus[{i}].name", g.get("name"), "a string")


