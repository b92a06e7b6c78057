"""``envman doctor``: will training work here — and if not, exactly why, and what to run to fix it.

Probes gather facts (or ``--facts`` reads them from another machine), the pure checks judge them
against knowledge derived from the matrix (envman/matrix/knowledge.py), and this module prints the report and picks
the exit code: 0 without errors, 1 with any error (with ``--strict``, warnings too).
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from envman.cli.output import emit_json
from envman.errors import EXIT_OK, EXIT_USER


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
        dockerfile: Optional[list[str]] = typer.Option(None, "--dockerfile", metavar="PATH", help="Judge this "
                                                       "Dockerfile before it is built (a directory: its own "
                                                       "Dockerfiles); repeatable."),
        target: Optional[list[str]] = typer.Option(None, "--target", metavar="GPU", help="With --dockerfile: the GPUs "
                                                   "to judge it for (default: envman.yaml's targets, else this "
                                                   "machine's); repeatable."),
    ) -> None:
        """Diagnose the machine, the Python environment and the image: verdicts with remedies."""
        from envman.app.doctor import collect_facts, run_doctor

        if dockerfile:
            from envman.app.dockerfile_doctor import run_dockerfile_doctor

            reports = run_dockerfile_doctor(dockerfile, project=path, targets=target or [])
            if as_json:
                emit_json({"schema": 1, "dockerfiles": [r.to_json() for r in reports]})
            else:
                for i, r in enumerate(reports):
                    typer.echo(("\n" if i else "") + f"== {r.path} (judged for {r.targets})")
                    typer.echo(r.report.text())
            bad = any(r.report.has_errors or (strict and r.report.has_warnings) for r in reports)
            raise typer.Exit(EXIT_USER if bad else EXIT_OK)
        if target:
            from envman.errors import UsageError

            raise UsageError("--target names the GPUs a Dockerfile is judged for; this machine's are probed",
                             hint="add --dockerfile PATH, or drop --target")

        if dump_facts == "-":
            import json

            facts = collect_facts(path, facts_file=facts_file, python=python, deep=deep)
            sys.stdout.write(json.dumps(facts, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
            raise typer.Exit(EXIT_OK)
        rep = run_doctor(path, facts_file=facts_file, python=python, deep=deep, dump_facts=dump_facts)
        if as_json:
            emit_json(rep.to_json())
        else:
            typer.echo(rep.text())
        raise typer.Exit(EXIT_USER if rep.has_errors or (strict and rep.has_warnings) else EXIT_OK)
