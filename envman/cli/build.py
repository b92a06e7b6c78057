"""``envman smoke`` and ``envman fetch``; ``envman build`` joins them here, on envman.engine."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from envman.errors import UsageError


def _echo_err(line: str) -> None:
    typer.echo(line, err=True)


def smoke(host: bool, image: Optional[str], expect: Optional[Path], require_gpu: bool, as_json: bool,
          save: Optional[Path], mount_script: bool) -> int:
    from envman.app import smoke as smoke_runner
    from envman.cli.output import emit_json

    if host == bool(image):
        raise UsageError("say where to run the smoke test: --host (this machine) or --image REF",
                         hint="envman smoke --host --expect envman.lock")
    if host:
        if expect is None:
            expect = Path("envman.lock")
            if not expect.is_file():
                raise UsageError("no envman.lock here to take the expected stack from",
                                 hint="pass --expect FILE (an expected-stack JSON or an envman.lock)")
        result = smoke_runner.run_smoke_host(expect, require_gpu=require_gpu)
        code = result.exit_code  # the script's own: 0, 1 or 6
    else:
        from envman.engine.docker import Engine

        engine = Engine()
        engine.ping()
        if not engine.image_exists(image):
            raise UsageError(f"no image {image} on the engine", hint="build it first: envman build")
        result = smoke_runner.run_smoke_in_image(engine, image, require_gpu=require_gpu, expect=expect,
                                                 mount_kit=mount_script)
        code = result.cli_exit_code()  # 0, 5 (EXIT_SMOKE) or 6
    if save is not None:
        smoke_runner.save_report(result, save)
    if as_json:
        emit_json(result.to_json())
    else:
        where = "this host" if host else f"{image}{' with GPUs' if result.gpus else ''}"
        typer.echo(f"smoke test on {where}:\n{result.summary()}")
    return code


def fetch(path: Path, wheelhouse: Optional[Path], lock: Optional[Path], python: Optional[str],
          glibc: Optional[str], as_json: bool, profile: Optional[str] = None) -> None:
    from envman.lock import wheelhouse as wh
    from envman.app.generate import Names
    from envman.cli.output import emit_json

    names = Names.for_profile(profile)
    lock_file = lock or path / (names.req if profile else wh.DEFAULT_LOCK)
    lock_py, lock_glibc = wh.lock_target(path, names.lock)
    py = python or lock_py
    if not py:
        raise UsageError(f"no Python version for the target: {path / 'envman.lock'} has no stack.python",
                         hint="pass --python 3.11 (the image's Python)")
    target = wh.Target(python=py, glibc=glibc or lock_glibc or wh.DEFAULT_GLIBC)
    target.tags()  # a bad --python fails here, before anything is read or downloaded
    parsed = wh.read_lock(lock_file)
    dest = wheelhouse or path / wh.DEFAULT_WHEELHOUSE
    res = wh.fetch_wheels(parsed, dest, target, on_output=None if as_json else (lambda s: _echo_err(f"  {s}")))
    if as_json:
        emit_json({"wheelhouse": str(res.wheelhouse), "downloaded": res.downloaded, "kept": res.kept,
                   "extra": res.extra, "python": py, "platforms": target.platforms()[0]})
        return
    typer.echo(
        f"wheelhouse {res.wheelhouse}: {len(res.downloaded)} downloaded, {len(res.kept)} already there, "
        f"all {len(res.downloaded) + len(res.kept)} hash-checked against {lock_file} "
        f"(target CPython {py}, {target.platforms()[0]})"
    )
    if res.extra:
        typer.echo(f"  {len(res.extra)} other file(s) in it are not in the lock for this target (left alone)")


EXPECT_HELP = ("Expected stack: a smoke JSON or an envman.lock. "
               "Default: ./envman.lock (--host), the one baked into the image (--image)")


def build(path: Path, opts) -> int:
    from envman.app.build import build_project

    outcomes = build_project(path, opts, echo=typer.echo)
    code = max((o.exit_code for o in outcomes), default=0)
    for o in outcomes:
        state = "built" if o.built else "reused"
        extra = f", pushed as {o.pushed['pinned']}" if o.pushed else ""
        gpu = ""
        if o.smoke is not None and getattr(o.smoke, "no_gpu", False):
            gpu = " — GPU checks skipped: no GPU visible (run `envman smoke --image` on a GPU machine)"
        verdict = "FAILED" if o.exit_code else "ok"
        typer.echo(f"{verdict}: {o.image} ({state}{extra}){gpu}" + (f" [{o.profile}]" if o.profile else ""))
    return code


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
    ) -> None:
        """Build the image with BuildKit, smoke-test it, tag it <name>:<lock hash>.

        Exit codes: 0 built (and smoke passed or found no GPU), 4 engine/build failure, 5 smoke failed."""
        from envman.app.build import BuildOptions

        if progress not in (None, "tty", "plain"):
            raise UsageError(f"--progress {progress!r}: expected tty or plain")
        opts = BuildOptions(profile, offline, wheelhouse, rebuild, tuple(tag or ()), not no_smoke, require_gpu,
                            ca_bundle, base_image, push, progress, allow_secrets_in_context=allow_secrets_in_context)
        raise typer.Exit(build(path, opts))

    @app.command("smoke")
    def smoke_cmd(
        host: bool = typer.Option(False, "--host", help="Run the smoke test with this Python on this machine"),
        image: Optional[str] = typer.Option(
            None, "--image", help="Run it inside this image (with GPUs when the host has them)"),
        expect: Optional[Path] = typer.Option(None, "--expect", help=EXPECT_HELP),
        require_gpu: bool = typer.Option(False, "--require-gpu", help="No visible GPU is a failure instead of exit 6"),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON report"),
        save: Optional[Path] = typer.Option(None, "--save", help="Also write the JSON report to this file"),
        mount_script: bool = typer.Option(
            False, "--mount-script", help="--image: run this envman's smoke program (its kit, bind-mounted) instead of the image's"),
    ) -> None:
        """Check that an environment matches its lock and that its GPU stack works.

        Exit codes: 0 passed (GPU checks included), 6 passed but no GPU visible; a failure is 1 with --host
        (the script's code) and 5 with --image."""
        raise typer.Exit(smoke(host, image, expect, require_gpu, as_json, save, mount_script))

    @app.command("fetch")
    def fetch_cmd(
        path: Path = typer.Argument(Path("."), help="Project directory"),
        wheelhouse: Optional[Path] = typer.Option(
            None, "--wheelhouse", help="Where the wheels go (default: PATH/.envman/wheelhouse)"),
        lock: Optional[Path] = typer.Option(
            None, "--lock", help="Hashed requirements lock (default: PATH/requirements.lock.txt)"),
        python: Optional[str] = typer.Option(
            None, "--python", help="Target Python X.Y (default: stack.python of PATH/envman.lock)"),
        glibc: Optional[str] = typer.Option(
            None, "--glibc", help="Newest manylinux glibc of the image (default: the lock's platform, else 2.28)"),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable summary"),
        profile: Optional[str] = typer.Option(None, "--profile", help="The wheels of this profile's lock (envman.P.lock)"),
    ) -> None:
        """Download every locked wheel, hash-checked, into a wheelhouse for offline builds."""
        fetch(path, wheelhouse, lock, python, glibc, as_json, profile)
