"""``envman`` entry point and its error boundary.

Heavy modules (yaml, jinja2, docker, the matrix) are imported inside the commands so that every
command starts in tens of milliseconds.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from typing import Any

import typer
from typer.core import TyperGroup

from envman.cli import (
    build,
    ci,
    cluster,
    doctor,
    fetch,
    fit,
    init,
    lock,
    matrix,
    mcp,
    resolve,
    smoke,
    uv,
    verify,
)
from envman.errors import EXIT_INTERNAL, EnvmanError

COMMANDS = (resolve, init, lock, build, verify, smoke, fetch, doctor, fit, matrix, ci, uv, mcp, cluster)


def make_app(commands=COMMANDS, completion: bool = True) -> typer.Typer:
    """envman's commands, registered in the order `envman --help` lists them (one module per command, named
    after it): a renamed or broken module fails at start-up instead of its command silently disappearing.
    The modules import typer only; each command imports its use case (envman.app.*) when it runs.
    ``completion``: the root's --install-completion/--show-completion (and the shells they complete for)."""
    cli = typer.Typer(
        name="envman",
        help="Reproducible GPU training environments: resolve a consistent driver/CUDA/cuDNN/framework/Python "
        "stack for your GPUs, generate and build the image, and diagnose the machine.",
        # `envman` alone: _root prints the help and exits 0 (no_args_is_help exits 2, as a usage error)
        no_args_is_help=False,
        # --install-completion/--show-completion: typer registers its bash/zsh/fish completion classes only for
        # an app that adds them; without, the env-var protocol answered "Shell bash not supported"
        add_completion=completion,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command's context
    )
    cli.callback(invoke_without_command=True)(_root)
    for command in commands:
        command.register(cli)
    return cli


def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", "-V", help="Print envman's version and exit.", is_eager=True),
) -> None:
    if version:
        from envman import __version__

        typer.echo(f"envman {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


app = make_app()


def _app_for(argv: list[str]) -> typer.Typer:
    """The app a run needs: for `envman lock …` only lock's command, since typer inspects every registered
    function's signature on each run (~9 ms for all fourteen); the full app for anything else (--help, a typo,
    shell completion, which reads its words from the environment and finds no argv)."""
    name = argv[0] if argv else None
    only = [c for c in COMMANDS if c.__name__.rsplit(".", 1)[-1] == name]
    return make_app(only, completion=False) if only else app


def report_error(err: EnvmanError) -> int:
    from envman.cli.output import clean  # and no escape sequence (report_error is called outside main too)
    from envman.redact import redact  # the last line of defence: no token in a message, whoever wrote it

    print(f"error: {clean(redact(err.message))}", file=sys.stderr)
    if err.hint:
        print(f"hint: {clean(redact(err.hint))}", file=sys.stderr)
    return err.exit_code


_OS_HINTS = {
    errno.ENOSPC: "free space on that disk (or point TMPDIR at one with room), then re-run",
    errno.EDQUOT: "free space in your quota, then re-run",
    errno.EROFS: "that folder is on a read-only file system: run where envman may write",
    errno.EACCES: "check that folder's permissions (or run as its owner)",
    errno.EPERM: "check that folder's permissions (or run as its owner)",
}


def os_error(exc: OSError) -> EnvmanError:
    """An OSError no step turned into its own message, as one line: what failed, on which file."""
    where = f": {exc.filename}" if exc.filename else ""
    return EnvmanError(f"{exc.strerror or exc}{where}", hint=_OS_HINTS.get(exc.errno or 0, "fix that, then re-run"))


class Interrupted(BaseException):
    """Ctrl-C. Typer turns a KeyboardInterrupt into a silent exit (or "Aborted!", by version); this one reaches
    the boundary. A BaseException, like KeyboardInterrupt, so that no ``except Exception`` swallows it."""


def _on_sigint(signum, frame):
    raise Interrupted()


def main(argv: list[str] | None = None) -> int:
    import threading

    previous = None
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous = signal.signal(signal.SIGINT, _on_sigint)
    from envman.cli.output import clean_streams

    with clean_streams():
        return _run(argv, previous)


def _json_error(args: list[str], err: EnvmanError) -> None:
    """With --json, an error is also a JSON document on stdout (unless the command already wrote its own)."""
    from envman.cli.jsonout import error_json, wants_json
    from envman.cli.output import emit_json

    if wants_json(args) and not getattr(sys.stdout, "written", False):
        emit_json(error_json(err))


def _run(argv: list[str] | None, previous: Any) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        run = _app_for(args)
        if len(args) == 1 and isinstance(getattr(typer.main.get_command(run), "commands", {}).get(args[0]), TyperGroup):
            argv = [args[0], "--help"]  # a group alone (`envman cluster`): its help and exit 0, as `envman` alone
        run(args=argv, prog_name="envman", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except EnvmanError as err:
        _json_error(args, err)
        return report_error(err)
    except (KeyboardInterrupt, Interrupted):
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # still one line, the traceback only on request
        if os.environ.get("ENVMAN_DEBUG"):
            raise
        from envman.redact import redact

        # an OSError is the machine's fault (a full disk, a read-only folder), not envman's: exit 1; else a bug
        said = os_error(exc) if isinstance(exc, OSError) else EnvmanError(
            f"internal error: {type(exc).__name__}: {redact(str(exc))}",
            hint="this is a bug in envman; re-run with ENVMAN_DEBUG=1 for the traceback and report it",
            exit_code=EXIT_INTERNAL)
        _json_error(args, said)
        return report_error(said)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return 0


def run() -> None:  # console_scripts target
    sys.exit(main())


if __name__ == "__main__":
    run()
