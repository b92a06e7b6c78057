"""``envman build``: build the image (BuildKit, podman or buildah), smoke-test it, tag it by lock hash."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from envman.errors import EXIT_OK, EXIT_SMOKE, UsageError


def exit_code(outcome) -> int:
    """5 (EXIT_SMOKE) when the image's smoke test failed; a failed build raised its own error (exit 4)."""
    return EXIT_SMOKE if outcome.smoke is not None and outcome.smoke.failed else EXIT_OK


def register(app: typer.Typer) -> None:
    @app.command("build")
    def build_cmd(
        path: Path = typer.Argument(Path("."), help="Project directory"),
        profile: Optional[str] = typer.Option(None, "--profile", help="Build only this profile (default: all)"),
        offline: bool = typer.Option(False, "--offline", help="Install from the wheelhouse `envman fetch` made (--no-index)"),
        wheelhouse: Optional[Path] = typer.Option(None, "--wheelhouse", help="Default: PATH/.envman/wheelhouse"),
        rebuild: bool = typer.Option(False, "--rebuild", help="Build even when an image for this lock hash exists"),
        tag: Optional[list[str]] = typer.Option(None, "--tag", help="Extra tag (repeatable)"),
        no_smoke: bool = typer.Option(False, "--no-smoke", help="Skip the smoke test"),
        require_gpu: bool = typer.Option(False, "--require-gpu", help="A smoke run without a visible GPU fails"),
        ca_bundle: Optional[Path] = typer.Option(None, "--ca-bundle", help="CA bundle for a TLS-intercepting proxy (default: pip's)"),
        base_image: Optional[str] = typer.Option(None, "--base-image", help="Must match the lock's base (see envman lock --base-image)"),
        push: Optional[str] = typer.Option(None, "--push", help="Push to REGISTRY/name:<lock hash> and pin the digest in envman.lock"),
        progress: Optional[str] = typer.Option(None, "--progress", help="tty or plain (default: tty in a terminal)"),
        allow_secrets_in_context: bool = typer.Option(
            False, "--allow-secrets-in-context", help="Build even when a credential file (.env, .netrc, *.pem …) would enter the build context"),
        engine: Optional[str] = typer.Option(
            None, "--engine", help="docker, podman or buildah (default: ENVMAN_ENGINE, else the first that works here)"),
        verify_repro: bool = typer.Option(
            False, "--verify-repro", help="Build twice from scratch; the two image IDs must agree (recorded in envman.lock)"),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output on stdout (docs/commands.md); the build's log goes to stderr"),
    ) -> None:
        """Build the image (BuildKit, podman or buildah), smoke-test it, tag it <name>:<lock hash>.

        Exit codes: 0 built (and smoke passed or found no GPU), 1 --verify-repro: the two builds differ (the
        files that differ are named), 4 engine/build failure, 5 smoke failed."""
        from envman.app.build import BuildOptions, build_project
        from envman.cli.output import Progress

        if progress not in (None, "tty", "plain"):
            raise UsageError(f"--progress {progress!r}: expected tty or plain",
                             hint="write --progress plain for a CI log, --progress tty for a terminal, or leave it out")
        opts = BuildOptions(profile, offline, wheelhouse, rebuild, tuple(tag or ()), not no_smoke, require_gpu,
                            ca_bundle, base_image, push, progress, allow_secrets_in_context=allow_secrets_in_context,
                            engine=engine, verify_repro=verify_repro)
        # with --json the build's log goes to stderr: stdout holds the one JSON document. A push's progress goes to
        # stderr, a live line on a terminal, else a line every 10 s; its clock starts with the push
        pushing: list[Progress] = []

        def push_progress(line: str) -> None:
            if not pushing:
                pushing.append(Progress(every=10.0))
            pushing[0](line)

        try:
            outcomes = build_project(path, opts, echo=lambda line: typer.echo(line, err=as_json), progress=push_progress)
        finally:
            for p in pushing:
                p.done()
        code = max((exit_code(o) for o in outcomes), default=EXIT_OK)
        if as_json:
            from envman.cli.jsonout import build_json
            from envman.cli.output import emit_json

            emit_json(build_json(outcomes, code))
            raise typer.Exit(code)
        for o in outcomes:
            state = "built" if o.built else "reused"
            extra = f", pushed as {o.pushed['pinned']}" if o.pushed else ""
            gpu = ""
            if o.smoke is not None and getattr(o.smoke, "no_gpu", False):
                gpu = " — GPU checks skipped: no GPU visible (run `envman smoke --image` on a GPU machine)"
            verdict = "FAILED" if exit_code(o) else "ok"
            typer.echo(f"{verdict}: {o.image} ({state}{extra}){gpu}" + (f" [{o.profile}]" if o.profile else ""))
        raise typer.Exit(code)
