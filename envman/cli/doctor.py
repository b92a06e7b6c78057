"""``envman doctor``: will training work here — and if not, exactly why, and what to run to fix it.

Probes gather facts (or ``--facts`` reads them from another machine), the pure checks judge them
against knowledge derived from the matrix, and this module prints the report and picks the exit code:
0 without errors, 1 with any error (with ``--strict``, warnings too).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from typing import Optional

import typer

from envman.errors import EXIT_OK, EXIT_USER, UsageError


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor_cmd(
        path: str = typer.Argument(".", help="Project directory: its envman.lock and the disk holding it."),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable report (stable contract)."),
        strict: bool = typer.Option(False, "--strict", help="Fail (exit 1) on warnings too."),
        deep: bool = typer.Option(False, "--deep", help="Also import the framework in a subprocess: its compiled "
                                  "arch list, the loaded cuDNN, a tiny GPU op (seconds)."),
        dump_facts: Optional[str] = typer.Option(None, "--dump-facts", metavar="FILE",
                                                 help="Write the facts as JSON to FILE ('-': stdout, no report)."),
        facts_file: Optional[str] = typer.Option(None, "--facts", metavar="FILE",
                                                 help="Judge a facts file from another machine instead of this one."),
        python: Optional[str] = typer.Option(None, "--python", metavar="PATH", help="The Python environment to "
                                             "examine (default: the active virtualenv, else envman's own)."),
    ) -> None:
        """Diagnose the machine, the Python environment and the image: verdicts with remedies."""
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
        # Knowledge (cached JSON, else the matrix) loads while the probes wait on subprocesses and the kernel.
        kn: dict = {}
        loader = threading.Thread(target=_load_knowledge, args=(kn,), daemon=True)
        loader.start()
        from envman import __version__
        from envman.app.doctor import read_facts_file, write_facts_file
        from envman.portable.facts.gather import gather_facts

        facts = read_facts_file(facts_file) if facts_file is not None else gather_facts(path, python=python, deep=deep, envman_version=__version__)
        if dump_facts == "-":
            import json

            sys.stdout.write(json.dumps(facts, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
            raise typer.Exit(EXIT_OK)
        if dump_facts:
            try:
                write_facts_file(dump_facts, facts)
            except OSError as exc:
                raise UsageError(f"cannot write {dump_facts}: {exc.strerror or exc}",
                                 hint="choose a writable path for --dump-facts") from None
        loader.join()
        raise typer.Exit(report(facts, kn.get("knowledge"), kn.get("error"), as_json=as_json, strict=strict))


def _load_knowledge(out: dict) -> None:
    from envman.app.doctor import load_knowledge
    from envman.errors import EnvmanError

    try:
        out["knowledge"] = load_knowledge()
    except EnvmanError as err:
        out["error"] = err.message
    except Exception as exc:  # noqa: BLE001 - the doctor still judges what needs no matrix
        out["error"] = f"{type(exc).__name__}: {exc}"


def report(facts: dict, knowledge, knowledge_error: str | None, *, as_json: bool, strict: bool) -> int:
    """Judge, print, and return the exit code."""
    from envman.portable.doctor.checks import run_checks, sort_findings
    from envman.portable.doctor.findings import ERROR, WARN, warn
    from envman.portable.doctor.report import render_text, report_dict

    findings = run_checks(facts, knowledge)
    if knowledge_error:
        findings = sort_findings([warn(
            "matrix-unavailable",
            f"envman's compatibility data cannot be loaded ({knowledge_error}): checks that need it are skipped",
            "reinstall envman, or fix the matrix file named above",
        )] + findings)
    if as_json:
        from envman.cli.output import emit_json

        emit_json(report_dict(findings, facts))
    else:
        typer.echo(render_text(findings, facts))
    if any(f.severity == ERROR for f in findings) or (strict and any(f.severity == WARN for f in findings)):
        return EXIT_USER
    return EXIT_OK
