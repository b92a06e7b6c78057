"""PURE: the sbatch scripts of one lock, one per container runtime — every line's value, ready for the dumb
template templates/cluster/train.sbatch.j2 (and nodes.sbatch.j2, the readiness run).

Runtimes:
  pyxis      srun --container-image=NAME_<lock12>.sqsh (NVIDIA's enroot plug-in; DGX/SuperPOD, cloud Slurm)
  apptainer  srun apptainer exec --nv NAME_<lock12>.sif (academic and national HPC)
  oci        srun --container=BUNDLE (Slurm's own OCI support, oci.conf; measured here with runc)

Every script runs the preflight once per node inside the image and stops before training when any node fails.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from envman.cluster.plan import (
    MASTER_PORT_EXPR,
    LockFacts,
    Raw,
    Shape,
    Site,
    image_env,
    launches_torchrun,
    preflight_argv,
    train_argv,
)
from envman.image.plan import VENV, WORKDIR

ALLREDUCE_MODULE = "envman_portable.allreduce"

RENDEZVOUS = "$MASTER_ADDR:$MASTER_PORT"  # quoted where it is used


@dataclass(frozen=True)
class ImageFiles:
    """Where the exported forms of the image are (`envman cluster export --out DIR`), as the nodes see them."""

    sqsh: str
    sif: str
    bundle: str


@dataclass(frozen=True)
class SbatchPlan:
    runtime: str
    file: str  # cluster/NAME_<lock12>.<runtime>.sbatch
    title: str
    about: tuple[str, ...]
    directives: tuple[tuple[str, str], ...]
    master_port: str
    image_path: str  # shell-quoted
    image_hint: str
    preflight: str  # the whole srun line
    train: str
    train_about: str
    reports: bool = False  # the readiness script: per-node JSON reports instead of training
    allreduce: tuple[str, ...] = ()  # the readiness script's NCCL all-reduce steps (torch stacks with GPUs)


def shell_join(words: list[str]) -> str:
    return " ".join(w if isinstance(w, Raw) else shlex.quote(w) for w in words)


def _env_words(preflight: bool) -> list[str]:
    return ["/usr/bin/env", *(f"{k}={v}" for k, v in image_env(preflight))]


def container(runtime: str, images: ImageFiles, gpu: bool) -> tuple[list[str], list[str], str]:
    """(srun options, the command's prefix, the image file) for one runtime."""
    if runtime == "pyxis":
        return [f"--container-image={images.sqsh}", f"--container-workdir={WORKDIR}"], [], images.sqsh
    if runtime == "apptainer":
        # Apptainer takes neither the image's WORKDIR nor its USER: --pwd sets the first; the job runs as the
        # submitting user, who can read the image's root-owned, read-only venv
        return [], ["apptainer", "exec", *(["--nv"] if gpu else []), "--pwd", WORKDIR, images.sif], images.sif
    if runtime == "oci":
        return [f"--container={images.bundle}"], [], images.bundle
    raise ValueError(f"unknown runtime {runtime!r}")


def directives(lf: LockFacts, site: Site, shape: Shape, *, suffix: str = "") -> tuple[tuple[str, str], ...]:
    d = [("job-name", lf.job_name + suffix), ("nodes", str(shape.nodes)), ("ntasks-per-node", "1")]
    if shape.gpus_per_node:
        d.append(("gpus-per-node", str(shape.gpus_per_node)))
    for key, value in (("constraint", site.constraint), ("partition", site.partition), ("account", site.account),
                       ("time", site.time)):
        if value:
            d.append((key, value))
    d.append(("output", "%x-%j.out"))
    return tuple(d)


def about_lines(lf: LockFacts, site: Site, shape: Shape, runtime: str) -> tuple[str, ...]:
    lines = [f"lock {lf.short} of {lf.job_name}: {lf.summary}" if lf.summary else f"lock {lf.short} of {lf.job_name}"]
    if lf.gpu and lf.min_driver:
        lines.append(f"needs NVIDIA driver >= {lf.min_driver} on every node (the preflight checks it: {runtime} "
                     "does not enforce the image's NVIDIA_REQUIRE_CUDA)")
    if site.constraint:
        lines.append(f"node class: Slurm feature {site.constraint!r} (envman.yaml cluster.constraint)")
    lines += list(shape.why)
    return tuple(lines)


def _hint(runtime: str, lf: LockFacts) -> str:
    if runtime == "apptainer":
        return f"build it: envman cluster export (or apptainer build {lf.stem}.sif {lf.stem}.def) on a shared path"
    return "write it: envman cluster export --out DIR (a folder every node mounts), then envman cluster slurm --images DIR"


def sbatch_plan(lf: LockFacts, site: Site, shape: Shape, runtime: str, images: ImageFiles) -> SbatchPlan:
    opts, prefix, path = container(runtime, images, lf.gpu)
    step = ["srun", Raw('--nodes="$SLURM_JOB_NUM_NODES"'), "--ntasks-per-node=1", *opts, *prefix]
    preflight = shell_join(step + _env_words(True) + preflight_argv(lf, shape))
    train = train_argv(lf, shape, rendezvous=RENDEZVOUS, nodes_expr="$SLURM_JOB_NUM_NODES")
    train_line = shell_join(step[:3] + ["--kill-on-bad-exit=1", *opts, *prefix] + _env_words(False) + train)
    what = ("torchrun on every node, rendezvous at $MASTER_ADDR:$MASTER_PORT" if launches_torchrun(lf)
            else "the project's command, once per node")
    return SbatchPlan(
        runtime=runtime, file=f"{lf.stem}.{runtime}.sbatch", title=f"envman: train {lf.job_name} on Slurm with {runtime}",
        about=about_lines(lf, site, shape, runtime), directives=directives(lf, site, shape), master_port=MASTER_PORT_EXPR,
        image_path=shlex.quote(path), image_hint=_hint(runtime, lf), preflight=preflight, train=train_line,
        train_about=what,
    )


def nodes_plan(lf: LockFacts, site: Site, shape: Shape, runtime: str, images: ImageFiles) -> SbatchPlan:
    """The readiness run: the preflight on every node with --json, one report per node in the reports folder
    (`envman cluster nodes FOLDER` makes the table); the job itself does not fail on a node that is not ready."""
    opts, prefix, path = container(runtime, images, lf.gpu)
    step = ["srun", Raw('--nodes="$SLURM_JOB_NUM_NODES"'), "--ntasks-per-node=1",
            Raw('--output="$REPORTS/%N.json"'), Raw('--error="$REPORTS/%N.log"'), *opts, *prefix]
    line = shell_join(step + _env_words(True) + preflight_argv(lf, shape, json_report=True))
    return SbatchPlan(
        runtime=runtime, file=f"{lf.stem}.nodes.{runtime}.sbatch",
        title=f"envman: is every node ready for {lf.job_name}? (preflight reports, {runtime})",
        about=about_lines(lf, site, shape, runtime), directives=directives(lf, site, shape, suffix="-nodes"),
        master_port=MASTER_PORT_EXPR, image_path=shlex.quote(path), image_hint=_hint(runtime, lf), preflight=line,
        train="", train_about="", reports=True, allreduce=allreduce_lines(lf, shape, opts, prefix),
    )


def allreduce_lines(lf: LockFacts, shape: Shape, opts: list[str], prefix: list[str]) -> tuple[str, ...]:
    """NCCL between the job's GPUs, when torch and GPUs are there: within each node (two GPUs or more), then
    across all nodes (two nodes or more). Each writes the rank-0 JSON line of envman_portable.allreduce."""
    g = shape.gpus_per_node
    if lf.framework != "torch" or not lf.gpu or not g:
        return ()
    run = ["-m", ALLREDUCE_MODULE]
    torchrun = f"{VENV}/bin/torchrun"
    out = []
    if g >= 2:
        step = ["srun", Raw('--nodes="$SLURM_JOB_NUM_NODES"'), "--ntasks-per-node=1",
                Raw('--output="$REPORTS/%N.allreduce.json"'), *opts, *prefix]
        out.append(shell_join(step + _env_words(True) + [torchrun, "--standalone", "--nnodes=1",
                                                         f"--nproc-per-node={g}", *run]) + " || true")
    if shape.nodes >= 2:
        step = ["srun", Raw('--nodes="$SLURM_JOB_NUM_NODES"'), "--ntasks-per-node=1",
                Raw('--output="$REPORTS/job.allreduce.json"'), *opts, *prefix]
        out.append(shell_join(step + _env_words(True) + [
            torchrun, Raw('--nnodes="$SLURM_JOB_NUM_NODES"'), f"--nproc-per-node={g}", "--rdzv-backend=c10d",
            Raw(f'--rdzv-endpoint="{RENDEZVOUS}"'), Raw('--rdzv-id="$SLURM_JOB_ID"'), *run]) + " || true")
    return tuple(out)
