"""PURE checks: facts (docs/facts.md) + knowledge (from the matrix) -> findings; no IO."""

from __future__ import annotations

from typing import Any

from ..frameworks import registered as plugins
from . import (
    checks_deep,
    checks_dockerfile,
    checks_drift,
    checks_env,
    checks_extbuild,
    checks_extensions,
    checks_gpu,
    checks_host,
    checks_jupyter,
    checks_libraries,
    checks_loader,
    checks_nccl,
    checks_packages,
    checks_toolchain,
    checks_wheels,
    checks_workload,
)
from .findings import SEVERITIES, Finding, info, warn
from .knowledge import Knowledge
from .view import FactsView, as_dict

CHECKS = tuple(c for m in (checks_gpu, checks_env, checks_packages, checks_libraries, checks_loader, checks_toolchain,
                           checks_deep, checks_drift, checks_extensions, checks_extbuild, checks_host, checks_workload,
                           checks_jupyter, checks_wheels, checks_dockerfile, checks_nccl) for c in m.CHECKS)  # in run order


def run_checks(facts: dict[str, Any], knowledge: Knowledge | None = None) -> list[Finding]:
    """Every check over the facts, errors first; a check that raises becomes a ``check-failed`` warning."""
    k = knowledge if knowledge is not None else Knowledge()
    v = FactsView(facts)
    out: list[Finding] = []
    for name, err in sorted(as_dict(v.f.get("probe_errors")).items()):
        out.append(info("probe-failed", f"probe {name} failed: {err}: what it gathers is not checked"))
    for check in CHECKS + tuple(c for p in plugins() for c in p.checks):  # then each framework's own
        try:
            out.extend(check(v, k))
        except Exception as exc:  # noqa: BLE001 - a bad fact must not hide every other finding
            out.append(warn(
                "check-failed",
                f"{check.__name__} could not evaluate these facts: {type(exc).__name__}: {exc}",
                "report it to envman's maintainers with the facts file (envman doctor --dump-facts facts.json)",
            ))
    return sort_findings(out)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: rank.get(f.severity, len(rank)))  # stable: check order within
