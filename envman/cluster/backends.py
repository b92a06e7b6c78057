"""PURE: the cluster backends and their registry — what files one lock becomes for one scheduler and runtime.

A backend turns one lock's facts (plan.LockFacts), the site (plan.Site) and the job's shape (plan.Shape) into
planned files: a name, a kind render.py knows ("sbatch": a slurm.SbatchPlan through the template; "manifest": a
dict through the YAML serializer), and the lines said above it. app/cluster.py writes every backend of a family
(`envman cluster slurm` → "slurm", `envman cluster k8s` → "k8s") the same way: validated, all or nothing, never
over a hand edit.

Adding one: a Slurm container runtime is one ``Runtime`` in runtimes.py (it becomes "slurm+NAME" here); any
other backend is a module with a ``plan`` function and one ``Backend`` line in ``BACKENDS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from envman.cluster.plan import LockFacts, Shape, Site
from envman.cluster.runtimes import RUNTIMES, ImageFiles


@dataclass(frozen=True)
class PlannedFile:
    name: str  # in the output folder: NAME_<lock12>.…
    kind: str  # "sbatch" | "manifest"
    body: Any  # slurm.SbatchPlan | a manifest dict
    about: tuple[str, ...] = ()  # comment lines above a manifest


@dataclass(frozen=True)
class Planned:
    files: tuple[PlannedFile, ...]
    run: str  # the file to submit first
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Backend:
    name: str  # "slurm+pyxis", "k8s"
    family: str  # the command that writes it: "slurm" | "k8s"
    plan: Callable[[LockFacts, Site, Shape, ImageFiles], Planned]
    needs_pinned: bool = False  # the image must be in a registry (pulled by digest)
    submit: str = "sbatch"  # how the first file is run: "sbatch FILE", "kubectl apply -f FILE"


def _slurm(runtime: str, lf: LockFacts, site: Site, shape: Shape, images: ImageFiles) -> Planned:
    from envman.cluster.slurm import nodes_plan, sbatch_plan

    train = sbatch_plan(lf, site, shape, runtime, images)
    ready = nodes_plan(lf, site, shape, runtime, images)
    return Planned((PlannedFile(train.file, "sbatch", train), PlannedFile(ready.file, "sbatch", ready)), train.file)


def _k8s(lf: LockFacts, site: Site, shape: Shape, images: ImageFiles) -> Planned:
    from envman.cluster.k8s import job_manifest, trainjob_manifest

    about = (f"lock {lf.short} of {lf.job_name}: {lf.summary}", *shape.why)
    files = [PlannedFile(f"{lf.stem}.job.yaml", "manifest", job_manifest(lf, site, shape),
                         (*about, "one node; multi-node: the TrainJob"))]
    tj = trainjob_manifest(lf, site, shape)
    if tj is None:
        note = ("no TrainJob (Kubeflow Trainer's torch runtime launches torchrun; this stack is not torch)",)
        return Planned(tuple(files), files[0].name, note)
    files.append(PlannedFile(f"{lf.stem}.trainjob.yaml", "manifest", tj,
                             (*about, "Kubeflow Trainer v2.2+ (runtimePatches), runtime torch-distributed")))
    return Planned(tuple(files), files[0].name)


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    *(Backend(f"slurm+{rt}", "slurm", partial(_slurm, rt)) for rt in RUNTIMES),
    Backend("k8s", "k8s", _k8s, needs_pinned=True, submit="kubectl apply -f"),
)}


def family(name: str) -> list[Backend]:
    return [b for b in BACKENDS.values() if b.family == name]
