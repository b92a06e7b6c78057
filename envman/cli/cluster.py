"""``envman cluster export|slurm|k8s|nodes``: the same lock on Slurm (pyxis, Apptainer, Slurm's OCI support) and
Kubernetes, with the same preflight on every node (docs/cluster.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

_PATH = "The project (default: here)"
_PROFILE = "Only this profile of envman.yaml (default: every lock)"
_OUT = "Where to write the files (default: .envman/cluster/ in the project, which packaging never sees)"
_IMAGES = ("The folder `envman cluster export` wrote the images to, as every node sees it "
           "(default: envman's cache folder, which only this machine sees)")


def _files(out, root: Path) -> None:
    def rel(p: Path) -> str:
        try:
            return str(p.relative_to(root))
        except ValueError:
            return str(p)

    if out.written:
        typer.echo("wrote: " + ", ".join(rel(p) for p in out.written))
    if out.unchanged and not out.written:
        typer.echo("up to date: nothing changed")
    for n in out.notes:
        typer.echo(f"  {n}")
    for c in out.commands:
        typer.echo(f"next: {c}")


def _nodes(reports: Path) -> int:
    from envman.app.cluster_nodes import gather_nodes
    from envman.errors import EXIT_OK, EXIT_USER

    classes, job, unreadable = gather_nodes(reports)
    for c in classes:
        typer.echo(f"{c.gpus} · driver {c.driver} · {len(c.nodes)} node(s): {c.verdict}")
        typer.echo(f"  nodes   {', '.join(c.nodes)}")
        typer.echo(f"  nccl    {c.nccl}")
        typer.echo(f"  shm     {c.shm}")
        for a in c.allreduce:
            typer.echo(f"  nccl    all-reduce {a}")
        for f in c.failures:
            typer.echo(f"  FAIL    {f}")
    if job:
        typer.echo(f"all nodes: all-reduce {job}")
    for name in unreadable:
        typer.echo(f"unreadable: {name}; see the .log beside it")
    ready = all(c.verdict == "ready" for c in classes) and not unreadable and "FAILED" not in (job or "")
    ready = ready and not any("FAILED" in a for c in classes for a in c.allreduce)
    return EXIT_OK if ready else EXIT_USER


def register(app: typer.Typer) -> None:
    cl = typer.Typer(help="Run the lock on a cluster: image exports, Slurm and Kubernetes files, node readiness.",
                     no_args_is_help=True, add_completion=False, rich_markup_mode=None)
    app.add_typer(cl, name="cluster")

    @cl.command("export")
    def export_cmd(
        path: Path = typer.Argument(Path("."), metavar="PATH", help=_PATH),
        out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Where to write the images "
                                           "(a folder every node mounts; default: envman's cache folder)"),
        formats: str = typer.Option("bundle,sqsh,archive", "--format", metavar="LIST",
                                    help="Any of bundle (OCI runtime bundle), sqsh (enroot), archive (OCI archive, "
                                         "for apptainer), layout (OCI image layout)"),
        profile: Optional[str] = typer.Option(None, "--profile", help=_PROFILE),
        force: bool = typer.Option(False, "--force", help="Export again even when the files exist for the lock hash"),
    ) -> None:
        """Export the built image: OCI bundle, enroot .sqsh, OCI archive, Apptainer .def; print the exact commands."""
        from envman.app.cluster_export import export_images

        fmts = tuple(f.strip() for f in formats.split(",") if f.strip())
        for res in export_images(path.resolve(), out=out, formats=fmts, profile=profile, force=force, echo=typer.echo):
            for kind, p in res.files.items():
                typer.echo(f"{kind:8} {p}")
            for n in res.notes:
                typer.echo(f"note: {n}")
            for c in res.commands:
                typer.echo(f"run: {c}")

    @cl.command("slurm")
    def slurm_cmd(
        path: Path = typer.Argument(Path("."), metavar="PATH", help=_PATH),
        images: Optional[Path] = typer.Option(None, "--images", metavar="DIR", help=_IMAGES),
        runtime: Optional[list[str]] = typer.Option(None, "--runtime", help="pyxis, apptainer or oci (repeatable; "
                                                    "default: all three)"),
        profile: Optional[str] = typer.Option(None, "--profile", help=_PROFILE),
        force: bool = typer.Option(False, "--force", help="Overwrite files that were edited by hand"),
        out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help=_OUT),
    ) -> None:
        """Write .envman/cluster/NAME_<lock12>.RUNTIME.sbatch: preflight on every node, then torchrun (and .nodes.
        readiness)."""
        from envman.app.cluster import RUNTIMES, slurm_files

        root = path.resolve()
        _files(slurm_files(root, images=images, runtimes=tuple(runtime or RUNTIMES), profile=profile, force=force,
                           out=out), root)

    @cl.command("k8s")
    def k8s_cmd(
        path: Path = typer.Argument(Path("."), metavar="PATH", help=_PATH),
        profile: Optional[str] = typer.Option(None, "--profile", help=_PROFILE),
        force: bool = typer.Option(False, "--force", help="Overwrite files that were edited by hand"),
        out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help=_OUT),
    ) -> None:
        """Write .envman/cluster/NAME_<lock12>.job.yaml and .trainjob.yaml (Kubeflow Trainer), image by digest."""
        from envman.app.cluster import k8s_files

        root = path.resolve()
        _files(k8s_files(root, profile=profile, force=force, out=out), root)

    @cl.command("nodes")
    def nodes_cmd(
        reports: Path = typer.Argument(..., metavar="REPORTS", help="The folder a .nodes. sbatch wrote (NODE.json)"),
    ) -> None:
        """The readiness table: nodes by class (GPUs, driver), the lock's verdict, what NCCL will find."""
        raise typer.Exit(_nodes(reports))
