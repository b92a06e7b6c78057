"""``envman ci github|gitlab|bake|check``: CI pipelines and a docker-bake.json generated from the locks."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

_REGISTRY = "Push the images to this registry, e.g. ghcr.io/acme or registry.example.com:5000/team"
_RUNNER = ("Label of a self-hosted GPU runner for the smoke test (gpu or gpu,h100 for several labels); "
           "PROFILE=LABEL for one profile (repeatable). Without it the smoke runs without a GPU.")
_RUNNER_GITLAB = _RUNNER.replace("Label", "Tag").replace("LABEL", "TAG").replace("labels", "tags")
_REGISTRY_GITLAB = _REGISTRY + " (default: the project's own, $CI_REGISTRY_IMAGE)"
_SPEC = ("Where the pipeline installs envman from: a wheel in the repository, envman @ git+URL@COMMIT, an https "
         "wheel URL#sha256=…, or envman==V with --envman-index (default: envman.yaml's ci.envman, else how this envman "
         "was installed)")
_INDEX = "The index that serves envman (default: envman.yaml's ci.index_url); never the public one, which has none"


def _report(out, kind: str | None) -> None:
    typer.echo("wrote: " + ", ".join(str(p.relative_to(out.root)) for p in out.written) if out.written
               else "up to date: nothing changed")
    for img in out.images:
        typer.echo(f"image: {img.tag}" + (f" (profile {img.profile})" if img.profile else ""))
    if out.profiled:
        typer.echo("stacks:")
        for names, summary in out.stacks:
            shared = " (shared: the same stack, their builds read each other's cache)" if len(names) > 1 else ""
            typer.echo(f"  {', '.join(names)}: {summary}{shared}")
    if kind is None:
        return
    for img in out.images:
        who = f"profile {img.profile}" if img.profile else "the image"
        if img.runner:
            typer.echo(f"smoke: {who} on the GPU runner {', '.join(img.runner)}")
        elif not img.gpu:
            typer.echo(f"smoke: {who} is CPU-only: no GPU runner needed")
        else:
            typer.echo(f"smoke: {who} without a GPU (no GPU runner: envman ci {kind} --gpu-runner {out.runner_word})")
    typer.echo(f"envman: the pipeline installs {out.install}")
    for note in out.setup_notes:
        typer.echo(note)


def _pipeline(kind: str, registry_help: str, runner: str, runner_help: str):
    """The command that writes ``kind``'s pipeline (github and gitlab take the same options)."""
    def command(
        path: Path = typer.Argument(Path("."), metavar="PATH", help="The project (default: here)"),
        registry: Optional[str] = typer.Option(None, "--registry", metavar="REGISTRY", help=registry_help),
        gpu_runner: Optional[list[str]] = typer.Option(None, "--gpu-runner", metavar=runner, help=runner_help),
        envman_spec: Optional[str] = typer.Option(None, "--envman-spec", metavar="SPEC", help=_SPEC),
        envman_index: Optional[str] = typer.Option(None, "--envman-index", metavar="URL", help=_INDEX),
        force: bool = typer.Option(False, "--force", help="Overwrite files that were edited by hand"),
    ) -> None:
        from envman.app.ci import write_pipeline

        _report(write_pipeline(kind, path, registry, gpu_runner, envman_spec, force, envman_index), kind)

    return command


def register(app: typer.Typer) -> None:
    ci = typer.Typer(help="Generate CI pipelines (GitHub Actions, GitLab CI) and a docker-bake.json from the locks.",
                     no_args_is_help=True, add_completion=False, rich_markup_mode=None)
    app.add_typer(ci, name="ci")
    ci.command("github", help="Write .github/workflows/envman.yml (and docker-bake.json with profiles): check, build, "
               "smoke.")(_pipeline("github", _REGISTRY, "LABEL", _RUNNER))
    ci.command("gitlab", help="Write .gitlab-ci.yml (and docker-bake.json with profiles): stages check, build, "
               "smoke.")(_pipeline("gitlab", _REGISTRY_GITLAB, "TAG", _RUNNER_GITLAB))

    @ci.command("bake")
    def bake_cmd(
        path: Path = typer.Argument(Path("."), metavar="PATH", help="The project (default: here)"),
        registry: Optional[str] = typer.Option(None, "--registry", metavar="REGISTRY", help=_REGISTRY + " (tags and registry cache)"),
        force: bool = typer.Option(False, "--force", help="Overwrite files that were edited by hand"),
    ) -> None:
        """Write docker-bake.json: one target per profile, built in parallel by `docker buildx bake`."""
        from envman.app.ci import write_bake

        _report(write_bake(path, registry, force), None)

    @ci.command("check")
    def check_cmd(path: Path = typer.Argument(Path("."), metavar="PATH", help="The project (default: here)")) -> None:
        """Exit 1 when a CI file envman generated names images of other locks than the current ones."""
        from envman.app.ci import check_ci

        stale, notes = check_ci(path)
        for n in notes:
            typer.echo(n)
        if stale:
            for s in stale:
                typer.echo(f"stale: {s}", err=True)
            typer.echo("hint: regenerate the CI files and commit them with the locks", err=True)
            raise typer.Exit(1)
        if not notes:
            typer.echo("no CI files generated by envman here")
