"""The doctor's report as text and as JSON-ready data (pure: the CLI prints it)."""

from __future__ import annotations

from typing import Any

from .findings import ERROR, INFO, WARN, Finding
from .view import FactsView, as_dict

REPORT_SCHEMA = 1
_HEADINGS = ((ERROR, "errors", "✗"), (WARN, "warnings", "!"), (INFO, "info", "-"))


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def counts(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(1 for f in findings if f.severity == s) for s, _, _ in _HEADINGS}


def status(findings: list[Finding]) -> str:
    c = counts(findings)
    return ERROR if c[ERROR] else WARN if c[WARN] else "ok"


def verdict_line(findings: list[Finding], facts: dict[str, Any]) -> str:
    """One line: can training work here (or in a Dockerfile's image), how many problems, on what stack."""
    c = counts(findings)
    v = FactsView(facts)
    stack = v.stack_summary() or "nothing detected"
    where = "in this Dockerfile's image" if isinstance(facts.get("dockerfile"), dict) else "here"
    if where != "here" and not v.frameworks:
        stack = "no framework found in what it installs" + (f", {stack}" if stack != "nothing detected" else "")
        if not c[ERROR] and not c[WARN]:
            return f"nothing to judge: {stack}"
    if where == "here" and not c[ERROR] and v.gpus_known and not v.gpus and not v.driver:
        return _cpu_only(v, c)
    if c[ERROR]:
        head = f"training will NOT work {where}: {_n(c[ERROR], 'error')}"
        if c[WARN]:
            head += f", {_n(c[WARN], 'warning')}"
    elif c[WARN]:
        head = f"ready, with {_n(c[WARN], 'warning')}"
    else:
        head = "ready"
    return f"{head} ({stack})"


def _cpu_only(v: FactsView, c: dict[str, int]) -> str:
    """No GPU and no driver: say so first, and what was looked at, never "ready" (a CPU run is not what a GPU
    training environment is for)."""
    fws = ", ".join(fw.label for fw in v.frameworks) or "no framework installed"
    looked = ["the PCI bus" if "pci_nvidia_gpus" in v.f else "", "the NVIDIA driver (NVML, nvidia-smi)"]
    py = as_dict(v.f.get("python"))
    if py.get("version"):
        looked.append(f"the Python {v.python} environment{' at ' + str(py['prefix']) if py.get('prefix') else ''} "
                      f"({_n(len(v.pip), 'package')})")
    if isinstance(v.f.get("docker"), dict):
        looked.append("Docker")
    warns = f", {_n(c[WARN], 'warning')}" if c[WARN] else ""
    return (f"CPU only{warns}: no NVIDIA GPU or driver found ({fws}); examined "
            + ", ".join(x for x in looked if x))


def render_text(findings: list[Finding], facts: dict[str, Any]) -> str:
    lines = ["verdict: " + verdict_line(findings, facts)]
    for sev, title, mark in _HEADINGS:
        group = [f for f in findings if f.severity == sev]
        if not group:
            continue
        lines += ["", f"{title} ({len(group)})"]
        for f in group:
            lines.append(f"  {mark} [{f.check}] {f.verdict}")
            if f.remedy:
                lines.append(f"      fix: {f.remedy}")
    return "\n".join(lines)


def report_dict(findings: list[Finding], facts: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": REPORT_SCHEMA,
        "verdict": verdict_line(findings, facts),
        "status": status(findings),
        "counts": counts(findings),
        "findings": [f.to_dict() for f in findings],
    }
