"""PURE: the sbatch scripts of one lock, one per container runtime (runtimes.py) — every line's value, ready
for the dumb template templates/cluster/train.sbatch.j2 (training, and the readiness run).

Every script runs the preflight once per node inside the image and stops before training when any node fails.
Quoting: every value the template prints outside a comment is one complete shell word made here (shlex.quote,
or a ``Raw`` word the planner wrote itself); the template never puts a value inside quotes of its own. Comments
and #SBATCH lines take only values validated to one line (values.py, site.py).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

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
from envman.cluster.runtimes import RUNTIMES, ImageFiles, Step
from envman.image.plan import VENV

ALLREDUCE_MODULE = "envman_portable.allreduce"

RENDEZVOUS = "$MASTER_ADDR:$MASTER_PORT"  # quoted where it is used


@dataclass(frozen=True)
class SbatchPlan:
    runtime: str
    file: str  # cluster/NAME_<lock12>.<runtime>.sbatch
    title: str
    about: tuple[str, ...]
    directives: tuple[tuple[str, str], ...]
    image_path: str  # one shell word (quoted)
    image_hint: str  # one shell word (quoted)
    preflight: str  # the whole srun line
    train: str = ""
    train_about: str = ""
    master_port: str = MASTER_PORT_EXPR
    reports: bool = False  # the readiness script: per-node JSON reports instead of training
    allreduce: tuple[str, ...] = ()  # the readiness script's NCCL all-reduce steps (torch stacks with GPUs)


def shell_join(words: list[str]) -> str:
    return " ".join(w if isinstance(w, Raw) else shlex.quote(w) for w in words)


def _env_words(preflight: bool, step: Step) -> list[str]:
    return ["/usr/bin/env", *(f"{k}={v}" for k, v in image_env(preflight)), *map(Raw, step.env)]


def _srun(st: Step, *options: str) -> list[str]:
    """One task per node of the job, inside the image: srun's own options, then the runtime's."""
    return ["srun", Raw('--nodes="$SLURM_JOB_NUM_NODES"'), "--ntasks-per-node=1", *options, *st.options, *st.prefix]


def container(runtime: str, images: ImageFiles, gpu: bool, mounts: tuple[str, ...] = ()) -> Step:
    """How one srun step of ``runtime`` enters the image (runtimes.py's registry)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}")
    return RUNTIMES[runtime].step(images, gpu, mounts)


def directives(lf: LockFacts, site: Site, shape: Shape, *, suffix: str = "") -> tuple[tuple[str, str], ...]:
    d = [("job-name", lf.job_name + suffix), ("nodes", str(shape.nodes)), ("ntasks-per-node", "1")]
    if shape.gpus_per_node:
        d.append(("gpus-per-node", str(shape.gpus_per_node)))
    if shape.cpus_per_node:
        d.append(("cpus-per-task", str(shape.cpus_per_node)))
    if shape.mem:
        d.append(("mem", shape.mem))
    for key, value in (("constraint", site.constraint), ("partition", site.partition), ("account", site.account),
                       ("time", site.time)):
        if value:
            d.append((key, value))
    d.append(("output", "%x-%j.out"))
    return tuple(d)


def about_lines(lf: LockFacts, site: Site, shape: Shape, runtime: str, step: Step) -> tuple[str, ...]:
    lines = [f"lock {lf.short} of {lf.job_name}: {lf.summary}" if lf.summary else f"lock {lf.short} of {lf.job_name}"]
    if lf.gpu and lf.min_driver:
        lines.append(f"needs NVIDIA driver >= {lf.min_driver} on every node (the preflight checks it: {runtime} "
                     "does not enforce the image's NVIDIA_REQUIRE_CUDA)")
    if site.constraint:
        lines.append(f"node class: Slurm feature {site.constraint!r} (envman.yaml cluster.constraint)")
    if site.mounts:
        lines.append(f"data mounts (envman.yaml cluster.mounts): {', '.join(site.mounts)}")
    if step.note:
        lines.append(step.note)
    lines += list(shape.why)
    return tuple(lines)


def _plan(lf: LockFacts, site: Site, shape: Shape, runtime: str, st: Step, **fields: Any) -> SbatchPlan:
    """What the training and the readiness script share: the header, the image and how to make it."""
    return SbatchPlan(runtime=runtime, about=about_lines(lf, site, shape, runtime, st), image_path=shlex.quote(st.image),
                      image_hint=shlex.quote(RUNTIMES[runtime].image_hint.replace("NAME", lf.stem)), **fields)


def sbatch_plan(lf: LockFacts, site: Site, shape: Shape, runtime: str, images: ImageFiles) -> SbatchPlan:
    st = container(runtime, images, lf.gpu, site.mounts)
    preflight = shell_join(_srun(st) + _env_words(True, st) + preflight_argv(lf, shape))
    train = train_argv(lf, shape, rendezvous=RENDEZVOUS, nodes_expr="$SLURM_JOB_NUM_NODES")
    train_line = shell_join(_srun(st, "--kill-on-bad-exit=1") + _env_words(False, st) + train)
    what = ("torchrun on every node, rendezvous at $MASTER_ADDR:$MASTER_PORT" if launches_torchrun(lf)
            else "the project's command, once per node")
    return _plan(lf, site, shape, runtime, st, file=f"{lf.stem}.{runtime}.sbatch",
                 title=f"envman: train {lf.job_name} on Slurm with {runtime}", directives=directives(lf, site, shape),
                 preflight=preflight, train=train_line, train_about=what)


def nodes_plan(lf: LockFacts, site: Site, shape: Shape, runtime: str, images: ImageFiles) -> SbatchPlan:
    """The readiness run: the preflight on every node with --json, one report per node in the reports folder
    (`envman cluster nodes FOLDER` makes the table); the job itself does not fail on a node that is not ready."""
    st = container(runtime, images, lf.gpu, site.mounts)
    step = _srun(st, Raw('--output="$REPORTS/%N.json"'), Raw('--error="$REPORTS/%N.log"'))
    line = shell_join(step + _env_words(True, st) + preflight_argv(lf, shape, json_report=True))
    return _plan(lf, site, shape, runtime, st, file=f"{lf.stem}.nodes.{runtime}.sbatch",
                 title=f"envman: is every node ready for {lf.job_name}? (preflight reports, {runtime})",
                 directives=directives(lf, site, shape, suffix="-nodes"), preflight=line, reports=True,
                 allreduce=allreduce_lines(lf, shape, st))


def allreduce_lines(lf: LockFacts, shape: Shape, st: Step) -> tuple[str, ...]:
    """NCCL between the job's GPUs, when torch and GPUs are there: within each node (two GPUs or more), then
    across all nodes (two nodes or more). Each writes the rank-0 JSON line of envman_portable.allreduce."""
    g = shape.gpus_per_node
    if lf.framework != "torch" or not lf.gpu or not g:
        return ()
    run = ["-m", ALLREDUCE_MODULE]
    torchrun = f"{VENV}/bin/torchrun"
    out = []
    if g >= 2:
        step = _srun(st, Raw('--output="$REPORTS/%N.allreduce.json"'))
        out.append(shell_join(step + _env_words(True, st) + [torchrun, "--standalone", "--nnodes=1",
                                                         f"--nproc-per-node={g}", *run]) + " || true")
    if shape.nodes >= 2:
        step = _srun(st, Raw('--output="$REPORTS/job.allreduce.json"'))
        out.append(shell_join(step + _env_words(True, st) + [
            torchrun, Raw('--nnodes="$SLURM_JOB_NUM_NODES"'), f"--nproc-per-node={g}", "--rdzv-backend=c10d",
            Raw(f'--rdzv-endpoint="{RENDEZVOUS}"'), Raw('--rdzv-id="$SLURM_JOB_ID"'), *run]) + " || true")
    return tuple(out)
