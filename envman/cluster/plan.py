"""PURE: what every cluster file needs from one lock — names, image references, the job's shape, and the
preflight and training commands as argument lists. No files, no environment, no subprocess.

The preflight is the same program on every runtime (envman_portable.preflight, baked into every image): the
smoke test, plus the lock's driver floor checked explicitly (Apptainer and Slurm's OCI support ignore the
image's NVIDIA_REQUIRE_CUDA), plus the GPU count the job asked for. Commands call the image's venv by absolute
path and set PATH themselves: a Slurm step's environment replaces the image's PATH (measured with Slurm 22.05
and runc: the job's PATH wins over the bundle's), and Apptainer does not take the image's WORKDIR or USER.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from envman.cluster.runtimes import RUNTIMES as _REGISTERED
from envman.image.plan import IMAGE_PATH, SMOKE_DIR, VENV

KIT = f"{SMOKE_DIR}/kit"
STACK = f"{SMOKE_DIR}/stack.json"
PYTHON = f"{VENV}/bin/python"
PREFLIGHT_MODULE = "envman_portable.preflight"
RUNTIMES = tuple(_REGISTERED)  # Slurm container runtimes (runtimes.py), in the order files are written
# enroot's PyTorch hook (conf/hooks/extra/50-slurm-pytorch.sh) picks the same port; so does every file here
MASTER_PORT_EXPR = "$((SLURM_JOB_ID % 4536 + 61000))"
_REGISTRY = re.compile(r"localhost|[^/]*[.:][^/]*")  # a first path component that is a registry host


@dataclass(frozen=True)
class LockedTarget:
    id: str
    name: str
    cc: str  # "9.0"


@dataclass(frozen=True)
class LockFacts:
    """What the cluster files take from one envman.lock (app/cluster.py reads it)."""

    name: str
    profile: str | None
    lock_hash: str
    framework: str | None  # "torch", "tensorflow" or None
    framework_version: str | None
    gpu: bool  # a CUDA stack: its nodes need a GPU and the driver floor
    min_driver: str | None  # the floor the preflight enforces
    arch_list: tuple[str, ...]
    targets: tuple[LockedTarget, ...]
    command: tuple[str, ...]
    pinned: str | None = None  # REGISTRY/NAME@sha256:… once `envman build --push` recorded it
    products: tuple[str, ...] = ()  # GFD nvidia.com/gpu.product values of a profile's GPUs
    summary: str = ""  # "torch 2.14.1 cu130, CUDA 13.0, Python 3.11, sm_80 sm_90"
    gpu_mem_gib: float | None = None  # the largest memory of the lock's target GPUs (matrices/gpus.yaml)

    @property
    def short(self) -> str:
        return self.lock_hash[:12]

    @property
    def tag(self) -> str:
        """The image `envman build` tags once its smoke test passed."""
        return f"{self.name}:{self.short}"

    @property
    def stem(self) -> str:
        """NAME_<lock12>: the file name of every image form of this lock (.sqsh, .sif, .oci.tar, …)."""
        return f"{self.name}_{self.short}"

    @property
    def job_name(self) -> str:
        return f"{self.name}-{self.profile}" if self.profile else self.name


@dataclass(frozen=True)
class Site:
    """envman.yaml ``cluster:`` — what only the site knows (site.py validates every value)."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    constraint: str | None = None  # the Slurm feature of the node class
    namespace: str | None = None
    cpus_per_gpu: int | None = None  # CPU cores per GPU (DataLoader workers); default DEFAULT_CPUS_PER_GPU
    mem: str | None = None  # Slurm --mem per node ("480G"); default RAM_PER_VRAM × the node's GPU memory
    tolerations: tuple[str, ...] = ("nvidia.com/gpu",)  # taint keys tolerated (GPU operator's default taint)
    mounts: tuple[str, ...] = ()  # the user's data: SRC[:DST[:ro|rw]] (Apptainer --bind, pyxis --container-mounts)
    profiles: tuple[tuple[str, Site], ...] = ()  # per-profile overrides, same keys

    def for_profile(self, profile: str | None) -> Site:
        over = dict(self.profiles).get(profile or "")
        if over is None:
            return self
        merged = {f: getattr(over, f) if getattr(over, f) is not None else getattr(self, f) for f in PROFILE_FIELDS}
        return Site(**merged, tolerations=self.tolerations, mounts=self.mounts)


# what a profile may override (every cluster: key but mounts, tolerations, profiles), in the order hints list them
PROFILE_FIELDS = ("constraint", "partition", "account", "time", "nodes", "gpus_per_node", "cpus_per_gpu", "mem",
                  "namespace")
# Policy, not hardware data: most GPU nodes have 8–32 cores per GPU; 8 keeps a DataLoader's workers off one core
# (Slurm's default is one CPU per task: 8 torchrun workers sharing one core) without asking for more than nodes have
DEFAULT_CPUS_PER_GPU = 8


@dataclass(frozen=True)
class Shape:
    nodes: int
    gpus_per_node: int  # 0 for a CPU stack
    why: tuple[str, ...] = ()
    cpus_per_node: int | None = None  # Slurm --cpus-per-task (one task per node: torchrun and its workers)
    mem: str | None = None  # Slurm --mem ("320G")


def node_resources(lf: LockFacts, site: Site, gpn: int) -> tuple[int | None, str | None, list[str]]:
    """CPUs and host memory per node: the site's numbers, else CPUs per GPU × GPUs and the doctor's rule for host
    memory (at least RAM_PER_VRAM × the GPUs' memory: checkpoints are loaded through host memory)."""
    from envman.portable.doctor.checks_env import RAM_PER_VRAM

    why = []
    cpus = None
    if gpn:
        per = site.cpus_per_gpu or DEFAULT_CPUS_PER_GPU
        cpus = per * gpn
        src = "envman.yaml cluster.cpus_per_gpu" if site.cpus_per_gpu else "envman's default; set cluster.cpus_per_gpu"
        why.append(f"{cpus} CPU(s) per node: {per} per GPU ({src})")
    mem = site.mem
    if mem:
        why.append(f"{mem} host memory per node: envman.yaml cluster.mem")
    elif gpn and lf.gpu_mem_gib:
        mem = f"{math.ceil(RAM_PER_VRAM * gpn * lf.gpu_mem_gib)}G"
        why.append(f"{mem} host memory per node: {RAM_PER_VRAM} × {gpn} × {lf.gpu_mem_gib:g} GiB of GPU memory "
                   "(the doctor's ram-small rule; set cluster.mem to change it)")
    return cpus, mem, why


def job_shape(lf: LockFacts, site: Site, fit_gpus: int | None = None, fit_note: str | None = None) -> Shape:
    """Nodes and GPUs per node: the site's numbers first, then `envman fit` on the workload (its total GPUs),
    else one GPU on one node."""
    if not lf.gpu:
        _, mem, more = node_resources(lf, site, 0)
        return Shape(site.nodes or 1, 0, ("CPU stack: no GPUs requested", *more), None, mem)
    why: list[str] = []
    total = fit_gpus
    if fit_note:
        why.append(fit_note)
    if site.gpus_per_node:
        gpn = site.gpus_per_node
        why.append(f"{gpn} GPU(s) per node: envman.yaml cluster.gpus_per_node")
    elif total:
        gpn = total
        why.append(f"{gpn} GPU(s) per node: the workload's {total} GPU(s) on one node")
    else:
        gpn = 1
        why.append("1 GPU per node: neither cluster.gpus_per_node nor a workload says more")
    if site.nodes:
        nodes = site.nodes
        why.append(f"{nodes} node(s): envman.yaml cluster.nodes")
    elif total and total > gpn:
        nodes = math.ceil(total / gpn)
        why.append(f"{nodes} node(s): the workload's {total} GPU(s) at {gpn} per node")
    else:
        nodes = 1
    cpus, mem, more = node_resources(lf, site, gpn)
    return Shape(nodes, gpn, tuple(why + more), cpus, mem)


# --- image references ------------------------------------------------------------------------------------
def split_ref(pinned: str) -> tuple[str | None, str]:
    """("registry", "repo/name@sha256:…"); registry None for Docker Hub."""
    first, _, rest = pinned.partition("/")
    if rest and _REGISTRY.fullmatch(first):
        return first, rest
    return None, pinned


def enroot_uri(pinned: str) -> str:
    """enroot's own syntax: ``docker://REGISTRY#IMAGE@sha256:…``. Without the ``#`` enroot takes the registry
    host for a Docker Hub namespace — the most common pyxis/enroot import error."""
    registry, rest = split_ref(pinned)
    return f"docker://{registry}#{rest}" if registry else f"docker://{rest}"


def enroot_import(lf: LockFacts, out_dir: str) -> list[str] | None:
    if not lf.pinned:
        return None
    return ["enroot", "import", "--output", f"{out_dir}/{lf.stem}.sqsh", enroot_uri(lf.pinned)]


def apptainer_source(lf: LockFacts, archive: str | None) -> tuple[str, str] | None:
    """(bootstrap agent, From:) for the definition: the pushed digest, else the exported OCI archive."""
    if lf.pinned:
        return "docker", lf.pinned
    if archive:
        return "oci-archive", archive
    return None


def apptainer_build(lf: LockFacts, out_dir: str) -> list[str]:
    """`apptainer build` from the definition file would run %test at build time, on a login node without a GPU
    (it fails there by design): build with --notest, test on a GPU node."""
    return ["apptainer", "build", "--notest", f"{out_dir}/{lf.stem}.sif", f"{out_dir}/{lf.stem}.def"]


def apptainer_build_direct(lf: LockFacts, out_dir: str, source: tuple[str, str]) -> list[str]:
    """The same image without the definition (no %test): ``docker://…@sha256:…`` or ``oci-archive:FILE``."""
    kind, where = source
    return ["apptainer", "build", f"{out_dir}/{lf.stem}.sif", f"{kind}://{where}" if kind == "docker" else f"{kind}:{where}"]


# --- commands --------------------------------------------------------------------------------------------
def preflight_argv(lf: LockFacts, shape: Shape, *, json_report: bool = False) -> list[str]:
    argv = [PYTHON, "-s", "-m", PREFLIGHT_MODULE, "--expect", STACK]
    if lf.gpu and lf.min_driver:
        argv += ["--min-driver", lf.min_driver]
    if lf.gpu and shape.gpus_per_node:
        argv += ["--min-gpus", str(shape.gpus_per_node)]
    if lf.gpu:
        argv.append("--require-gpu")
    if json_report:
        argv.append("--json")
    return argv


def image_env(preflight: bool = False) -> list[tuple[str, str]]:
    """Set on the command itself: the job's environment would otherwise replace the image's PATH."""
    env = [("PATH", IMAGE_PATH)]
    if preflight:
        env.append(("PYTHONPATH", KIT))
    return env


class Raw(str):
    """A word the batch shell expands ("$MASTER_ADDR:$MASTER_PORT"): written by the planner, never from input."""


def torchrun_argv(command: tuple[str, ...], *, nodes: int | str, gpus: int, rendezvous: str | None) -> list[str]:
    """``python X.py args`` / ``python -m mod args`` → torchrun with the same program; a command that is not a
    python call (torchrun, accelerate, a script) is the user's own launcher and is kept as it is."""
    if not command or command[0] not in ("python", "python3", PYTHON):
        return list(command)
    head: list[str] = [f"{VENV}/bin/torchrun"]
    if rendezvous is None:
        head += ["--standalone", "--nnodes=1"]
    else:
        head += [Raw(f'--nnodes="{nodes}"'), "--rdzv-backend=c10d", Raw(f'--rdzv-endpoint="{rendezvous}"'),
                 Raw('--rdzv-id="$SLURM_JOB_ID"')]
    head.append(f"--nproc-per-node={max(gpus, 1)}")
    return head + list(command[1:])


def launches_torchrun(lf: LockFacts) -> bool:
    """envman puts torchrun in front of the project's python command (torch stacks only)."""
    return lf.framework == "torch" and bool(lf.command) and lf.command[0] in ("python", "python3", PYTHON)


def train_argv(lf: LockFacts, shape: Shape, *, rendezvous: str | None, nodes_expr: str | None = None) -> list[str]:
    if lf.framework == "torch":
        return torchrun_argv(lf.command, nodes=nodes_expr or shape.nodes, gpus=shape.gpus_per_node,
                             rendezvous=rendezvous)
    return list(lf.command)


def trainer_argv(lf: LockFacts) -> list[str]:
    """Under Kubeflow Trainer's torch runtime torchrun reads the topology from the PET_* variables it sets."""
    cmd = lf.command
    if lf.framework == "torch" and cmd and cmd[0] in ("python", "python3", PYTHON):
        return [f"{VENV}/bin/torchrun", *cmd[1:]]
    return list(cmd)
