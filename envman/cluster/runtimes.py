"""PURE: the Slurm container runtimes, one value each, and their registry. A runtime says how one srun step
enters the image: srun's own options, the words in front of the command, and which exported form of the image
it runs. Adding one (Charliecloud, Sarus, podman-hpc …) is one ``Runtime`` here and one line in ``RUNTIMES``;
slurm.py, the CLI's --runtime and the tests read the registry.

  pyxis      srun --container-image=NAME_<lock12>.sqsh (NVIDIA's enroot plug-in; DGX/SuperPOD, cloud Slurm)
  apptainer  srun apptainer exec --nv --cleanenv NAME_<lock12>.sif (academic and national HPC)
  oci        srun --container=BUNDLE (Slurm's own OCI support, oci.conf; measured here with runc)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envman.image.plan import WORKDIR


@dataclass(frozen=True)
class ImageFiles:
    """Where the exported forms of the image are (`envman cluster export --out DIR`), as the nodes see them."""

    sqsh: str
    sif: str
    bundle: str


@dataclass(frozen=True)
class Step:
    options: list[str]  # srun's options
    prefix: list[str]  # words before the command (apptainer exec …)
    image: str  # the file the step needs on every node
    env: list[str]  # NAME=value words the runtime must pass in itself (Raw: expanded by the batch shell)
    note: str | None = None  # said in the sbatch's header


@dataclass(frozen=True)
class Runtime:
    name: str
    step: Callable[[ImageFiles, bool, tuple[str, ...]], Step]  # (images, gpu, mounts)
    image_hint: str  # how to make its image form, when it is missing


def _pyxis(images: ImageFiles, gpu: bool, mounts: tuple[str, ...]) -> Step:
    opts = [f"--container-image={images.sqsh}", f"--container-workdir={WORKDIR}"]
    if mounts:
        opts.append("--container-mounts=" + ",".join(mounts))
    return Step(opts, [], images.sqsh, [])


# What --cleanenv would drop but a step needs, taken on each node from the task's own environment (Slurm sets
# CUDA_VISIBLE_DEVICES and the task ids per task, so the batch shell's values are wrong on other nodes):
# Apptainer passes APPTAINERENV_NAME into the container as NAME even with --cleanenv (apptainer.org docs,
# "Environment and Metadata"; NVIDIA/NVFlare#5038 met the same with Slurm GPU selection)
TASK_ENV = ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS")
TASK_ENV_SCRIPT = "".join(f'[ -z "${{{v}+x}}" ] || export APPTAINERENV_{v}="${v}"; ' for v in TASK_ENV) + 'exec "$@"'


def _apptainer(images: ImageFiles, gpu: bool, mounts: tuple[str, ...]) -> Step:
    # Apptainer takes neither the image's WORKDIR nor its USER: --pwd sets the first; the job runs as the
    # submitting user, who can read the image's root-owned, read-only venv. --cleanenv: the login shell's
    # variables (a conda PYTHONPATH, LD_LIBRARY_PATH) stay out; the rendezvous is passed in by name, the task's
    # GPUs and ids through TASK_ENV_SCRIPT, run by sh on each node
    binds = [w for m in mounts for w in ("--bind", m)]
    prefix = ["/bin/sh", "-c", TASK_ENV_SCRIPT, "envman-task",
              "apptainer", "exec", *(["--nv"] if gpu else []), "--cleanenv", *binds, "--pwd", WORKDIR, images.sif]
    return Step([], prefix, images.sif, ['MASTER_ADDR="$MASTER_ADDR"', 'MASTER_PORT="$MASTER_PORT"'])


def _oci(images: ImageFiles, gpu: bool, mounts: tuple[str, ...]) -> Step:
    note = ("cluster.mounts are not added: Slurm's OCI runtime takes mounts from the bundle's config.json"
            if mounts else None)
    return Step([f"--container={images.bundle}"], [], images.bundle, [], note)


_EXPORT = ("write it: envman cluster export --out DIR (a folder every node mounts), "
           "then envman cluster slurm --images DIR")
RUNTIMES: dict[str, Runtime] = {r.name: r for r in (
    Runtime("pyxis", _pyxis, _EXPORT),
    Runtime("apptainer", _apptainer, "build it: envman cluster export (or apptainer build NAME.sif NAME.def) "
                                     "on a shared path"),
    Runtime("oci", _oci, _EXPORT),
)}
