"""PURE: decide everything the Dockerfile, compose file and devcontainer need; templates only print.

Cache order (repo2docker's lesson): base → system packages → user → Python venv → framework (its own
layer, keyed by the framework lock alone) → the rest of the locked requirements → smoke script →
the project's source → what names the lock (stack.json, the SBOM), the spec's env:, labels and command last.
A source edit rebuilds no dependency layer; a requirements edit does not re-install the framework; an edit
of command: or env: rebuilds only the last layers. Each install step's lock file carries a header that names
its content only (files.py), so its layer is reused exactly while its locked lines are. Lock files are bind-mounted into the RUN that needs them (no layer holds them),
package caches are cache mounts, and the CA bundle is a BuildKit secret.

Reproducible as bits (docs/reproducible.md): every stage declares ``SOURCE_DATE_EPOCH`` (the lock's date, not
the clock) and ``PYTHONHASHSEED=0`` as build args, so every RUN sees them: Python then writes checked-hash
.pyc files (PEP 552) whose bytes do not depend on the build's clock or hash seed, and a layer built under
another date is never reused from the cache. The steps that leave machine-local state behind (apt, useradd)
remove it in the same RUN (a later RUN could only hide it under a whiteout): logs, ldconfig's aux-cache, and
the password-change day in /etc/shadow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envman.image.stages import (
    BUILDER,
    EDITABLE_ARG,
    PROJECT_MOUNT,
    PROJECT_WHEELS,
    WHEELS_DIR,
    SourceBuilds,
    project_install_command,
)
from envman.lockedstack import LockedStack
from envman.model import Resolution

VENV = "/opt/venv"
APP_USER = "app"
APP_UID = 1000
WORKDIR = "/app"
# The project's source reaches /app through a stage that drops what envman locked it with: the lock files are
# bind-mounted into the install steps and never a layer of the image (they name the indexes a lock used).
SOURCE_STAGE = "envman-source"
SOURCE_DIR = "/tmp/envman-source"
NOT_SOURCE = (".envman", "envman.lock", "envman.*.lock", "requirements.lock.txt", "requirements.*.lock.txt",
              "pylock.toml", "pylock.*.toml", "Dockerfile.dockerignore", "Dockerfile.*.dockerignore")
SMOKE_DIR = "/opt/envman"
CA_SECRET = "envman_ca"
SHM_SIZE = "16gb"  # PyTorch DataLoader workers share batches through /dev/shm; Docker's default is 64 MiB
IMAGE_PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # the venv first
# the same RUN that writes them removes what differs between two builds of the same inputs: logs (apt, dpkg,
# lastlog/faillog from useradd) and ldconfig's aux-cache (inode numbers and file times)
SCRUB = "find /var/log -type f -delete && rm -f /var/cache/ldconfig/aux-cache"


def quote_docker(value: str) -> str:
    """A double-quoted Dockerfile word (ENV/LABEL): backslash, quote and $ are escaped, so no value can end
    the word, continue the line or expand a variable. Control characters are refused earlier (spec.py)."""
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029" for c in value):
        raise ValueError(f"control character in {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


@dataclass(frozen=True)
class Step:
    comment: str
    mounts: tuple[str, ...]
    command: str
    apt: tuple[str, ...] = ()  # the system packages an apt step installs

    @property
    def text(self) -> str:
        """The RUN arguments: one mount per line, then the command."""
        return " \\\n    ".join([*self.mounts, self.command])


def stage_args(source_date_epoch: int | None) -> tuple[tuple[str, str], ...]:
    """The build args every stage declares (``ARG NAME=value``): none without a date (the Dockerfile then stays
    as it was), else SOURCE_DATE_EPOCH and PYTHONHASHSEED, so each RUN's tools see them."""
    if source_date_epoch is None:
        return ()
    return (("SOURCE_DATE_EPOCH", str(int(source_date_epoch))), ("PYTHONHASHSEED", "0"))


@dataclass(frozen=True)
class BuilderStage:
    """``FROM base AS envman-wheels``: source-only packages become wheels here; only /wheels leaves it."""

    name: str
    base_image: str
    system_step: Step | None
    venv_command: str
    framework_step: Step | None
    tools_step: Step | None
    env: tuple[tuple[str, str], ...]
    wheel_step: Step | None  # the source-only packages (None: only the project is built here)
    project_step: Step | None = None  # the project's own compiled code, into a wheel
    args: tuple[tuple[str, str], ...] = ()  # stage_args


@dataclass(frozen=True)
class DockerPlan:
    name: str
    base_image: str
    system_step: Step | None
    venv_command: str
    user_command: str
    user: str
    workdir: str
    framework_step: Step | None
    requirements_step: Step | None
    smoke_dir: str
    env: tuple[tuple[str, str], ...]  # name, quoted value: before the project's source
    labels: tuple[tuple[str, str], ...]
    cmd_json: str | None
    gpu: bool
    stack_file: str
    builder: BuilderStage | None = None
    wheels_step: Step | None = None  # the builder's wheels, installed before the rest of the lock
    project_step: Step | None = None  # the project itself, after its source
    editable_arg: str = EDITABLE_ARG
    source_stage: str = SOURCE_STAGE  # the stage /app is copied from
    source_dir: str = SOURCE_DIR
    source_prune: str = "rm -rf " + " ".join(f"{SOURCE_DIR}/{n}" for n in NOT_SOURCE)
    args: tuple[tuple[str, str], ...] = ()  # stage_args: declared right after FROM
    sbom_file: str | None = None  # the context's SBOM, copied beside the smoke kit
    late_env: tuple[tuple[str, str], ...] = ()  # the spec's env:, after the project's source (none installs it)

    @property
    def apt_packages(self) -> tuple[str, ...]:
        """Every system package the build installs with apt (the builder stage's build tools included)."""
        steps = (self.system_step, self.builder.system_step if self.builder else None)
        return tuple(sorted({a for step in steps if step is not None for a in step.apt}))
    # "--platform=linux/arm64 " on FROM for an aarch64 stack, so a build on an x86_64 machine pulls the arm64
    # image (emulated); empty for x86_64, whose Dockerfile stays as it always was
    from_platform: str = ""


def require_cuda(res: Resolution) -> str:
    """The NVIDIA runtime's refusal line. A stack resolved for a fleet that runs its CUDA only through
    minor-version compatibility must not be refused there: it then requires the major and the driver floor."""
    if res.driver_mode == "minor-compat" and res.min_driver_minor_compat:
        assert res.cuda is not None  # minor-version compatibility is a mode of a CUDA stack
        return f"cuda>={res.cuda.split('.')[0]}.0 driver>={res.min_driver_minor_compat}"
    return f"cuda>={res.cuda}"


def _user_command(reproducible: bool = False) -> str:
    # Ubuntu 24.04 images (nvidia/cuda 12.6+) already own uid 1000 as "ubuntu": take the uid over, so
    # files in bind-mounted workspaces keep the usual host uid.
    cmd = (
        f'existing="$(getent passwd {APP_UID} | cut -d: -f1)"; '
        f'if [ -n "$existing" ]; then userdel --remove "$existing"; fi; '
        f"useradd --create-home --uid {APP_UID} --user-group --shell /bin/sh {APP_USER}"
    )
    if reproducible:
        # /etc/shadow's third field is the day of the last password change (the build's day, unless this
        # shadow honours SOURCE_DATE_EPOCH): empty, as for an account that never had a password
        cmd += f" && sed -i -E 's/^({APP_USER}:[^:]*):[0-9]*:/\\1::/' /etc/shadow && {SCRUB}"
    return cmd


def _lock_mounts(lock_name: str, offline_image: str | None, wheels: str = "/wheels-in") -> tuple[list[str], str]:
    """A pip step's mounts for ``lock_name`` (pip's cache, the lock, the CA secret; offline, the wheelhouse at
    ``wheels``) and the pip options an offline step adds."""
    mounts = [
        "--mount=type=cache,target=/root/.cache/pip",
        f"--mount=type=bind,source={lock_name},target=/tmp/envman/{lock_name}",
        f"--mount=type=secret,id={CA_SECRET}",
    ]
    if not offline_image:
        return mounts, ""
    return [*mounts, f"--mount=type=bind,from={offline_image},target={wheels}"], f"--no-index --find-links {wheels}"


def _pip_step(comment: str, lock_name: str, offline_image: str | None, wheels: str = "/wheels", link: str = "") -> Step:
    mounts, src = _lock_mounts(lock_name, offline_image, wheels)
    # The CA bundle (a TLS-intercepting proxy) exists only while this RUN runs, as a secret file.
    cmd = (
        f"{_ca_export()} && {VENV}/bin/pip install --require-hashes --no-deps --only-binary=:all: {src}".rstrip()
        + f" -r /tmp/envman/{lock_name}{link}"
    )
    return Step(comment, tuple(mounts), cmd)


def _ca_export() -> str:
    return f"if [ -s /run/secrets/{CA_SECRET} ]; then export PIP_CERT=/run/secrets/{CA_SECRET}; fi"


def apt_snapshot_sources(stamp: str) -> str:
    """Shell that points apt at the snapshot archive of ``stamp``, for Debian and Ubuntu bases (read from
    /etc/os-release in the image); any other distribution stops the build, naming itself."""
    if not re.fullmatch(r"\d{8}T\d{6}Z", stamp):
        raise ValueError(f"not a snapshot timestamp: {stamp!r}")
    deb = f"http://snapshot.debian.org/archive/debian/{stamp}"
    sec = f"http://snapshot.debian.org/archive/debian-security/{stamp}"
    ubu = f"https://snapshot.ubuntu.com/ubuntu/{stamp}"  # https only (http redirects): needs ca-certificates
    line = "deb [check-valid-until=no] %s %s %s\\n"
    return (". /etc/os-release && rm -f /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list.d/ubuntu.sources && "
            'case "$ID" in '
            f"debian) printf '{line}{line}{line}' {deb} \"$VERSION_CODENAME\" main {sec} \"$VERSION_CODENAME-security\" main "
            f"{deb} \"$VERSION_CODENAME-updates\" main > /etc/apt/sources.list ;; "
            f"ubuntu) printf '{line}{line}{line}' {ubu} \"$VERSION_CODENAME\" 'main universe' {ubu} "
            f"\"$VERSION_CODENAME-updates\" 'main universe' {ubu} \"$VERSION_CODENAME-security\" 'main universe' "
            "> /etc/apt/sources.list ;; "
            '*) echo "envman: no apt snapshot archive for $ID" >&2; exit 1 ;; esac')


def _apt_step(comment: str, apt: list[str], reproducible: bool = False, pins: Mapping[str, str] | None = None,
              snapshot: str | None = None) -> Step:
    """``pins``: every package of the install's closure at the version the lock pins (lock/apt.py), so apt
    installs exactly those or fails naming the one the archive no longer has; ``snapshot``: the archive as
    it was at that timestamp."""
    for n, v in (pins or {}).items():  # Debian policy's grammar: nothing else reaches the shell
        if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", n) or not re.fullmatch(r"[A-Za-z0-9.+~:-]+", v):
            raise ValueError(f"not an apt package pin: {n}={v}")
    names = [f"{n}={v}" for n, v in sorted(pins.items())] if pins else apt
    sources = f"{apt_snapshot_sources(snapshot)} && " if snapshot else ""
    return Step(
        comment,
        ("--mount=type=cache,target=/var/cache/apt,sharing=locked", "--mount=type=cache,target=/var/lib/apt/lists,sharing=locked"),
        f"{sources}rm -f /etc/apt/apt.conf.d/docker-clean && apt-get update && "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " + " ".join(names)
        + (f" && {SCRUB}" if reproducible else ""),
        tuple(apt),
    )


def venv_command(python_exe: str, python: str) -> str:
    """The venv's creation, after a check that the base image's Python is the lock's: a base whose Python is
    another minor (a --base-image, a distro Python on nvidia/cuda) otherwise fails later as pip's 'no matching
    distribution' for the first wheel built for one Python."""
    if not re.fullmatch(r"\d+\.\d+", python):
        raise ValueError(f"not a Python minor: {python!r}")
    probe = 'v="$(' + python_exe + ' -c \'import sys; sys.stdout.write("%d.%d" % sys.version_info[:2])\')"'
    why = (f'the base image runs Python $v, the lock is for Python {python}: pass --base-image with Python {python}, '
           f'or lock for $v (--python)')
    return f'{probe} && {{ [ "$v" = "{python}" ] || {{ echo "{why}" >&2; exit 1; }}; }} && {python_exe} -m venv {VENV}'


def plan_builder(stack: LockedStack, sb: SourceBuilds, source_lock: str, fw_step: Step | None) -> BuilderStage:
    """The builder stage of ``stack`` (``sb``: its source builds, locked in ``source_lock``). CUDA sources build on
    the stack's devel image when the base is nvidia/cuda (same Ubuntu, same Python: the wheel fits the final stage),
    else with nvcc from NVIDIA's wheels on the same base; either way nvcc never reaches the final image."""
    base_image, base_kind, build_lock, offline_image = (stack.base.pinned, stack.base.kind, stack.tools_lock,
                                                        stack.offline_image)
    cuda_archs = sorted({f"{t.cc.major}.{t.cc.minor}" for t in stack.res.targets},
                        key=lambda v: tuple(map(int, v.split("."))))
    image = base_image
    if sb.cuda and base_kind.startswith("cuda-") and stack.devel_image:
        image = stack.devel_image
    apt = (["build-essential"] if sb.compiler else []) + list(sb.apt)
    if base_kind.startswith("cuda-"):
        apt += ["python3", "python3-venv"]
    if image != base_image or (sb.compiler and base_kind != "slim"):
        # the distro's python3 (nvidia/cuda, a base of the user's own) has no C headers: a compiled build needs
        # them (python:X-slim carries its own under /usr/local/include)
        apt += ["python3-dev"]
    reproducible = stack.source_date_epoch is not None
    system = _apt_step("build tools (this stage only)", sorted(set(apt)), reproducible) if apt else None
    tools = list(sb.build_requires)
    env: list[tuple[str, str]] = []
    link = ""
    if sb.nvcc and image == base_image:
        tools.append(sb.nvcc[0])
        # the nvcc wheel's folder under site-packages is a CUDA_HOME; torch.utils.cpp_extension reads CUDA_HOME
        env.append(("CUDA_HOME", f"{VENV}/cuda"))
        link = (f" && ln -sfn \"$({VENV}/bin/python -c 'import site, sys; "
                f"sys.stdout.write(site.getsitepackages()[0])')/{sb.nvcc[1]}\" {VENV}/cuda")
    if sb.cuda and cuda_archs:
        # no GPU in a build: without this, torch's extension builder compiles for every arch torch knows
        env.append(("TORCH_CUDA_ARCH_LIST", ";".join(cuda_archs)))
    tools_step = None
    if build_lock:
        # Every build requirement (the sdists' own [build-system] requires, the table's, nvcc) is locked with
        # hashes: the builds then run without isolation and download nothing unpinned; offline, from the
        # wheelhouse too (envman fetch adds the build lock's wheels)
        tools_step = _pip_step("what the builds need, locked with hashes (this stage only)", build_lock, offline_image,
                               "/wheels-in", link)
    elif tools:
        tools_step = Step("what the builds import (this stage only; not part of the lock)",
                          ("--mount=type=cache,target=/root/.cache/pip", f"--mount=type=secret,id={CA_SECRET}"),
                          f"{_ca_export()} && {VENV}/bin/pip install " + " ".join(sorted(tools)) + link)
    mounts, src = _lock_mounts(source_lock, offline_image)
    # --use-pep517: an sdist without pyproject.toml (promise) must not fall back to `setup.py bdist_wheel`,
    # which older pips (Debian's 23.0) run without the wheel package
    isolation = " --use-pep517" + (" --no-build-isolation" if sb.framework or build_lock else "")
    wheel = Step(
        "source-only packages → wheels, from their hash-checked sdists: " + " ".join(f"{n}=={v}" for n, v in sb.packages),
        tuple(mounts),
        f"{_ca_export()} && {VENV}/bin/pip wheel --require-hashes --no-deps{isolation}{' ' + src if src else ''} "
        f"--wheel-dir {WHEELS_DIR} -r /tmp/envman/{source_lock}",
    ) if sb.packages else None
    project = Step(
        "the project → a wheel (its build backend and what the build imports or asks for are installed above; "
        "its compiled code, if any, is compiled here), built in a tmpfs copy: a read-write bind mount would be "
        "written through to the project (buildah)",
        ("--mount=type=bind,target=/tmp/envman/context", f"--mount=type=tmpfs,target={PROJECT_MOUNT}"),
        f"cp -a /tmp/envman/context/. {PROJECT_MOUNT}/ && {VENV}/bin/pip wheel --no-deps --no-build-isolation "
        f"--no-index --no-cache-dir --wheel-dir {PROJECT_WHEELS} {PROJECT_MOUNT}",
    ) if sb.project else None
    return BuilderStage(
        name=BUILDER, base_image=image, system_step=system, venv_command=venv_command("python3", stack.res.python),
        framework_step=fw_step if sb.framework else None, tools_step=tools_step,
        env=tuple((k, quote_docker(v)) for k, v in env), wheel_step=wheel, project_step=project,
        args=stage_args(stack.source_date_epoch),
    )


def plan_dockerfile(stack: LockedStack, lock_hash: str) -> DockerPlan:
    """The image of the locked ``stack`` (``lock_hash``: its lock's identity, which the labels name). With the
    lock's date (``stack.source_date_epoch``, lock/repro.py) the image is planned to be the same bits on every
    build (stage_args, the scrubbing steps); without it the Dockerfile is as it was before."""
    res, source_builds, offline_image = stack.res, stack.builds, stack.offline_image
    base_image, base_kind = stack.base.pinned, stack.base.kind
    source_date_epoch, apt_pins, apt_snapshot = stack.source_date_epoch, stack.apt_pins, stack.apt_snapshot
    fw_lock, source_lock = stack.fw_lock, stack.source_lock
    reproducible = source_date_epoch is not None
    # nvidia/cuda images carry no Python: the distro's, with venv support.
    apt = sorted({*stack.apt, *(("python3", "python3-venv") if base_kind.startswith("cuda-") else ())})
    system = _apt_step("system packages (apt lists and archives in cache mounts, not layers)"
                       + (", at the versions the lock pins" if apt_pins else "")
                       + (f", from the snapshot archive at {apt_snapshot}" if apt_snapshot else ""),
                       apt, reproducible, apt_pins, apt_snapshot) if apt else None
    fw = _pip_step(f"{res.framework} {res.version} ({res.variant}) and what it needs: its own layer", fw_lock, offline_image) if fw_lock else None
    builder = wheels = None
    if source_builds is not None and source_lock:
        builder = plan_builder(stack, source_builds, source_lock, fw)
        wheels = Step(f"the wheels built in {BUILDER} (the rest of the lock then skips them as installed)",
                      (f"--mount=type=bind,from={BUILDER},source={WHEELS_DIR},target=/tmp/envman/wheels",),
                      f"{VENV}/bin/pip install --no-deps --no-index --no-cache-dir /tmp/envman/wheels/*.whl"
                      ) if source_builds.packages else None
    project = None
    if stack.project.installed and source_builds is not None and source_builds.project and source_lock:
        # compiled in the builder: the image gets the wheel, never a compiler (the devcontainer still installs
        # /app editable, which recompiles: it needs the builder's tools)
        # its compiled modules are also put beside their sources in the work directory: `python train.py` there
        # imports the package from /app (the script's folder comes first on sys.path), as after an in-place build
        inplace = ("import glob, os, zipfile; [z.extract(n, '" + WORKDIR + "') for w in glob.glob('/tmp/envman/"
                   "project-wheel/*.whl') for z in [zipfile.ZipFile(w)] for n in z.namelist() if n.endswith('.so') "
                   "and os.path.isdir(os.path.join('" + WORKDIR + "', os.path.dirname(n)))]")
        project = Step(f"the project itself, as the wheel {BUILDER} built of it (no dependencies: they are locked); its "
                       "compiled modules beside their sources too",
                       (f"--mount=type=bind,from={BUILDER},source={PROJECT_WHEELS},target=/tmp/envman/project-wheel",),
                       f"{VENV}/bin/pip install --no-deps --no-index --no-cache-dir /tmp/envman/project-wheel/*.whl"
                       f' && {VENV}/bin/python -c "{inplace}"')
    elif stack.project.installed:
        project = Step("the project itself (no dependencies: they are the locked layers above; console scripts on PATH)",
                       (f"--mount=type=tmpfs,target={PROJECT_MOUNT}",),
                       project_install_command(VENV, WORKDIR))
    rq = _pip_step("the rest of the locked requirements (already-installed framework packages are skipped)", stack.req_lock, offline_image) if stack.req_lock else None
    gpu = res.cuda is not None and res.framework is not None and res.variant != "cpu"
    base_env = [
        ("PATH", IMAGE_PATH),
        ("PYTHONUNBUFFERED", "1"),
        ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    ]
    if res.framework == "torch":
        # enroot's PyTorch hook (50-slurm-pytorch.sh) exports MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_RANK under
        # Slurm only when the image's environment names PYTORCH_VERSION, as NVIDIA's PyTorch images do
        base_env.append(("PYTORCH_VERSION", str(res.version)))
    if gpu:
        # The NVIDIA container runtime reads these: expose the GPUs, and refuse a host whose driver is too old.
        base_env += [
            ("NVIDIA_VISIBLE_DEVICES", "all"),
            ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
            ("NVIDIA_REQUIRE_CUDA", require_cuda(res)),
        ]
    # the spec's env: is set after the project's source, among the last layers (an edit of it rebuilds no earlier
    # layer), unless the project is installed there: its build may read it (SETUPTOOLS_SCM_PRETEND_VERSION …)
    user_env = tuple((k, quote_docker(v)) for k, v in stack.project.env)
    early = project is not None
    all_env = tuple((k, quote_docker(v)) for k, v in base_env) + (user_env if early else ())
    summary = stack_summary(res)
    labels = [
        ("org.opencontainers.image.title", stack.name),
        ("org.opencontainers.image.description", f"envman training image: {summary}"),
        ("org.opencontainers.image.version", lock_hash[:12]),
        ("org.opencontainers.image.base.name", base_image),
        ("dev.envman.lock-hash", lock_hash),
        ("dev.envman.inputs-hash", stack.inputs_hash),
        ("dev.envman.stack", summary),
        ("dev.envman.version", stack.version),
    ]
    return DockerPlan(
        name=stack.name, base_image=base_image, system_step=system, venv_command=venv_command("python3", res.python),
        user_command=_user_command(reproducible), user=APP_USER, workdir=WORKDIR,
        framework_step=fw, requirements_step=rq, smoke_dir=SMOKE_DIR, env=all_env,
        labels=tuple((k, quote_docker(v)) for k, v in labels),
        cmd_json=json.dumps(list(stack.project.command)) if stack.project.command else None, gpu=gpu,
        stack_file=stack.stack_file,
        builder=builder, wheels_step=wheels, project_step=project, from_platform=from_platform(res),
        args=stage_args(source_date_epoch), sbom_file=stack.sbom_file, late_env=() if early else user_env,
    )


def with_index_secret(plan: DockerPlan, secret: str) -> DockerPlan:
    """The plan of a lock that names private indexes (``${ENVMAN_INDEX_…}`` in its requirement locks): every pip
    step that reaches an index also mounts their URLs, a BuildKit secret (``secret``, a file of ``export NAME=URL``
    lines), and reads it first; like the CA bundle, it exists only while that RUN runs (lock/indexes.py)."""
    from dataclasses import replace

    load = f"if [ -s /run/secrets/{secret} ]; then . /run/secrets/{secret}; fi && "

    def step(s: Step | None) -> Step | None:
        if s is None or f"--mount=type=secret,id={CA_SECRET}" not in s.mounts:
            return s
        return replace(s, mounts=(*s.mounts, f"--mount=type=secret,id={secret}"), command=load + s.command)

    builder = plan.builder
    if builder is not None:
        builder = replace(builder, framework_step=step(builder.framework_step), tools_step=step(builder.tools_step),
                          wheel_step=step(builder.wheel_step) or builder.wheel_step)
    return replace(plan, framework_step=step(plan.framework_step), requirements_step=step(plan.requirements_step),
                   builder=builder)


def from_platform(res: Resolution) -> str:
    return f"--platform={res.platform} " if res.arch != "x86_64" else ""


def stack_summary(res: Resolution) -> str:
    parts = []
    if res.framework:
        parts.append(f"{res.framework} {res.version} {res.variant}")
    if res.cuda:
        parts.append(f"CUDA {res.cuda}")
    if res.cudnn:
        parts.append(f"cuDNN {res.cudnn}")
    parts.append(f"Python {res.python}")
    if res.arch_list:
        parts.append(" ".join(res.arch_list))
    if res.arch != "x86_64":
        parts.append(res.platform)
    return ", ".join(parts)


def stack_expectation(stack: LockedStack, lock_hash: str) -> dict[str, Any]:
    """stack.json: the stack the smoke script checks the image of ``stack`` against (baked in as JSON): the
    project's imports ([distribution, module or None] pairs, each once), its console scripts (run with --help) and
    the image's command, whose entry point's imports the smoke test imports."""
    res, scripts, command = stack.res, stack.project.scripts, stack.project.command
    unique = list(dict.fromkeys(tuple(i) for i in stack.project.imports))
    return {
        "schema": 1,
        "framework": None if res.framework is None else {"name": res.framework, "version": str(res.version), "variant": res.variant},
        "cuda": res.cuda if res.variant != "cpu" else None,
        "cudnn": res.cudnn,
        "nccl": res.nccl,
        "python": res.python,
        "arch_list": list(res.arch_list),
        "imports": [list(i) for i in unique],
        "lock_hash": lock_hash,
        **({"scripts": sorted(set(scripts))} if scripts else {}),
        **({"command": list(command)} if command else {}),
    }


def compose_plan(name: str, services: list[tuple[str | None, str, str, bool]]) -> dict[str, Any]:
    """One service per stack: (profile, dockerfile, image tag, gpu)."""
    out: dict[str, Any] = {}
    for profile, dockerfile, tag, gpu in services:
        svc: dict[str, Any] = {"image": tag, "build": {"context": ".", "dockerfile": dockerfile}, "shm_size": SHM_SIZE}
        if gpu:
            svc["deploy"] = {"resources": {"reservations": {"devices": [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]}}}
        out["train" if profile is None else f"train-{profile}"] = svc
    return {"name": name, "services": out}


def devcontainer_plan(name: str, gpu: bool, dockerfile: str = "../Dockerfile",
                      editable: bool = False) -> dict[str, Any]:
    build: dict[str, Any] = {"dockerfile": dockerfile, "context": ".."}
    if editable:
        # the project is installed editable from /app, where the workspace is mounted: edits are live
        build["args"] = {EDITABLE_ARG: "1"}
    d: dict[str, Any] = {
        "name": name,
        "build": build,
        "runArgs": (["--gpus", "all"] if gpu else []) + ["--shm-size", SHM_SIZE.replace("gb", "g")],
        "remoteUser": APP_USER,
        "workspaceFolder": WORKDIR,
        "workspaceMount": f"source=${{localWorkspaceFolder}},target={WORKDIR},type=bind",
    }
    if gpu:
        d["hostRequirements"] = {"gpu": True}
    return d
