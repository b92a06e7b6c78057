"""``envman build``: build the locked stack, smoke-test it, tag it by lock hash; ``--push`` pins its digest."""

from __future__ import annotations

import configparser
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envman.app.aptpin import PROXY_VARS
from envman.app.generate import offline_built, offline_dockerfile
from envman.app.lock import check_lock
from envman.app.lockinputs import stack_files
from envman.errors import EXIT_OK, EXIT_SMOKE, LockError, UsageError
from envman.files import write_atomic
from envman.image.plan import CA_SECRET
from envman.lock.layout import StackFiles
from envman.lock.lockfile import Lock, read_lock, write_lock
from envman.lock.wheelhouse import DEFAULT_WHEELHOUSE
from envman.model import PLATFORM_ARCH, PLATFORMS
from envman.project.spec import load_spec, validate_base_image

if TYPE_CHECKING:
    from envman.engine.buildkit import BuildResult
    from envman.engine.protocol import ContainerEngine


@dataclass
class BuildOptions:
    profile: str | None = None
    offline: bool = False
    wheelhouse: Path | None = None
    rebuild: bool = False
    tags: tuple[str, ...] = ()
    smoke: bool = True
    require_gpu: bool = False
    ca_bundle: Path | None = None
    base_image: str | None = None
    push: str | None = None
    progress: str | None = None
    allow_secrets_in_context: bool = False
    engine: str | None = None  # docker, podman, buildah; None: the first that works (engine/select.py)
    verify_repro: bool = False  # two builds from scratch must give one image ID (app/repro.py)


@dataclass
class BuildOutcome:
    profile: str | None
    image: str
    built: bool
    exit_code: int = EXIT_OK
    smoke: object | None = None
    pushed: dict | None = None
    notes: list[str] = field(default_factory=list)


def default_ca_bundle(env: dict[str, str] | None = None) -> Path | None:
    """The bundle the host's pip/requests are told to use: PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE,
    then `cert` in pip's config files. None when nothing is set (no proxy to trust)."""
    env = dict(os.environ) if env is None else env
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        if env.get(var) and Path(env[var]).is_file():
            return Path(env[var])
    home = Path(env.get("HOME", "~")).expanduser()
    xdg = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    for conf in (Path(env.get("PIP_CONFIG_FILE", "/nonexistent")), xdg / "pip" / "pip.conf", home / ".pip" / "pip.conf",
                 Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf")):
        if not conf.is_file():
            continue
        cp = configparser.ConfigParser()
        try:
            cp.read(conf)
        except configparser.Error:
            continue
        cert = cp.get("global", "cert", fallback=None)
        if cert and Path(cert).is_file():
            return Path(cert)
    return None


def private_index_values(root: Path, names: StackFiles, lock: Lock, env: dict[str, str] | None = None):
    """The private indexes the lock's files name (``${ENVMAN_INDEX_…}``), with their URLs found where the lock
    found them, or in a variable of their name. An index nobody supplies is refused, naming its variable."""
    from envman.app.lockinputs import ProjectInputs
    from envman.inputs import read_regular_text
    from envman.lock.indexes import PrivateIndex, named_in, project_indexes
    from envman.matrix.load import load_matrix

    env = dict(os.environ) if env is None else env
    wanted: set[str] = set()
    for f in (names.req, names.fw, names.pylock, names.source, names.build, names.rest):
        try:
            wanted |= set(named_in(read_regular_text(root / f)))
        except (OSError, UnicodeDecodeError):
            continue
    if not wanted:
        return []
    spec = load_spec(root)
    if spec is None:
        raise UsageError(f"no envman.yaml in {root}", hint="run `envman init` first")
    inputs = ProjectInputs.read(root, spec, load_matrix())
    fw = ((lock.get("stack") or {}).get("framework") or {}).get("index_url")
    known = {i.name: i for i in project_indexes(fw, spec.index_urls, inputs.index_urls, env)}
    known.update({n: PrivateIndex(n, env[n]) for n in wanted if n not in known and env.get(n)})  # given by name
    missing = sorted(wanted - set(known))
    if missing:
        raise UsageError(f"{names.req} names the private index {missing[0]}, whose URL this run was not given"
                         + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                         hint=f"set {missing[0]} to its URL with its credentials (or the UV_INDEX_URL / "
                              "UV_EXTRA_INDEX_URL the lock was made with): a build gets it as a secret")
    return [known[n] for n in sorted(wanted)]


def wheelhouse_image(directory: Path) -> str:
    """A name for the wheelhouse's content: its wheels' and sdists' names and sizes."""
    h = hashlib.sha256()
    for p in sorted(f for f in directory.iterdir() if f.is_file() and f.name.endswith((".whl", ".tar.gz", ".zip"))):
        h.update(f"{p.name}\0{p.stat().st_size}\n".encode())
    return f"envman-wheelhouse:{h.hexdigest()[:12]}"


def _profiles(root: Path, opts: BuildOptions) -> list[StackFiles]:
    spec = load_spec(root)
    if spec is None:
        raise UsageError(f"no envman.yaml in {root}", hint="run `envman init` first")
    if not spec.profiles:
        if opts.profile:
            raise UsageError(f"--profile {opts.profile}: envman.yaml declares no profiles",
                             hint="drop --profile (the project has one image), or add profiles: to envman.yaml")
        return [stack_files(root, None)]
    names = [p.name for p in spec.profiles]
    if opts.profile:
        if opts.profile not in names:
            raise UsageError(f"--profile {opts.profile}: no such profile", hint="profiles: " + ", ".join(names))
        return [StackFiles.for_profile(opts.profile)]
    return [StackFiles.for_profile(n) for n in names]


def build_project(root: Path, opts: BuildOptions, echo: Callable[[str], None],
                  engine: ContainerEngine | None = None, progress: Callable[[str], None] | None = None) -> list[BuildOutcome]:
    """``progress``: where a push's progress lines go (layers, bytes; throttled by the caller)."""
    root = root.resolve()
    if opts.base_image is not None:
        validate_base_image(opts.base_image)
    targets = _profiles(root, opts)
    if not opts.allow_secrets_in_context:
        for n in targets:
            check_context(root, n.dockerfile)
    stale = check_lock(root)
    if stale:
        raise LockError("the lock is stale: " + "; ".join(stale), hint="run `envman lock`, then build")
    if engine is None:
        from envman.engine.select import choose_engine

        choice = choose_engine(opts.engine, need_repro=opts.verify_repro)
        engine = choice.engine
        echo(f"engine: {engine.describe()} [{choice.why}]")
    else:
        echo(f"engine: {engine.describe()}")
    if opts.verify_repro:
        from envman.app.repro import require_clamping

        require_clamping(engine)
    return [_build_one(root, n, opts, echo, engine, progress) for n in targets]


def check_context(root: Path, dockerfile: str = "Dockerfile") -> None:
    """`envman build` sends the project as its build context: refuse one that would ship a credential file."""
    from envman.image.context import context_secrets

    leaked = context_secrets(root, dockerfile)
    if leaked:
        more = f" (and {len(leaked) - 5} more)" if len(leaked) > 5 else ""
        raise UsageError(
            f"the build context would ship credentials: {', '.join(leaked[:5])}{more}",
            hint="move them out of the project or list them in .dockerignore (`envman lock --force` regenerates it); "
                 "--allow-secrets-in-context builds anyway",
        )


def _build_one(root: Path, names: StackFiles, opts: BuildOptions, echo: Callable[[str], None],
               engine: ContainerEngine, progress: Callable[[str], None] | None = None) -> BuildOutcome:
    from envman.app.buildruns import build_lock, sweep
    from envman.resources import cache_dir

    lock_path = root / names.lock
    lock = read_lock(lock_path)
    dockerfile = _buildable_dockerfile(root, names, opts, lock)
    name, short = lock.name, lock.short_hash
    good = f"{name}:{short}"
    out = BuildOutcome(names.profile, good, built=False)
    label = f"[{names.profile}] " if names.profile else ""

    remote = f"{opts.push.rstrip('/')}/{name}:{short}" if opts.push else None
    if remote:
        digest = engine.registry_digest(remote)
        if digest:
            echo(f"{label}{remote} is already in the registry ({digest}): skipping build and push")
            out.pushed = _record_push(lock_path, lock, remote, digest)
            return out

    sweep(engine, name, lambda m: echo(label + m))
    tested = None  # the image ID this run built and tested: the only one it may tag
    with build_lock(cache_dir(), name, short, lambda m: echo(label + m)):
        if engine.image_exists(good) and not (opts.rebuild or opts.verify_repro):
            echo(f"{label}{good} exists for this lock hash: skipping the build (--rebuild forces it)")
        else:
            tested = _build_and_test(root, names, opts, echo, engine, lock, dockerfile, out)
            if tested is None:
                return out
    source = tested or good  # a tag another run moves meanwhile never reaches this run's tags or push
    for t in opts.tags:
        engine.tag(source, t)
        echo(f"{label}tagged {t}")
    if remote:
        engine.tag(source, remote)
        digest = engine.push(remote, progress=progress)
        out.pushed = _record_push(lock_path, lock, remote, digest)
        echo(f"{label}pushed {remote} → {out.pushed['pinned']} (recorded in {names.lock})")
    return out


def _build_and_test(root: Path, names: StackFiles, opts: BuildOptions, echo: Callable[[str], None],
                    engine: ContainerEngine, lock: Lock, dockerfile: Path, out: BuildOutcome) -> str | None:
    """Build this run's candidate (its own tag), smoke-test it and tag that image ID good: the ID, or None when
    the smoke test failed (the image then keeps ``<hash>-unverified`` for inspection)."""
    import shutil
    import tempfile

    from envman.app import smoke as smoke_runner
    from envman.app.buildruns import candidate_tag
    from envman.image.context import context_warning
    from envman.lock.indexes import SECRET, secret_text
    from envman.process import Owner

    label = f"[{names.profile}] " if names.profile else ""
    candidate = f"{lock.name}:{candidate_tag(lock.short_hash, Owner.me())}"
    build_file = _offline_build_file(root, names, opts, echo, engine) if opts.offline else dockerfile
    secrets: dict[str, Path] = {}
    ca = opts.ca_bundle or default_ca_bundle()
    if opts.ca_bundle is not None and not opts.ca_bundle.is_file():
        raise UsageError(f"--ca-bundle {opts.ca_bundle}: no such file", hint="the PEM bundle your proxy's CA is in")
    if ca is not None:
        secrets[CA_SECRET] = ca
        echo(f"{label}CA bundle {ca} goes to the build as a BuildKit secret (never a layer)")
    found = private_index_values(root, names, lock)
    indexes = secret_text(found) if found else None  # the envman_indexes secret: `export NAME=URL` lines
    if found and opts.progress is None:  # a tty build client draws pip's index lines itself, past `redact`
        opts = replace(opts, progress="plain")
        echo(f"{label}the lock names a private index: the build's log is plain, so envman redacts every line of it")
    args = {k: os.environ[k] for k in PROXY_VARS if os.environ.get(k)}
    if args:
        echo(f"{label}proxy settings passed as build args: {', '.join(sorted(args))} (not kept in the image)")
    big = context_warning(root, dockerfile=names.dockerfile)
    if big:
        echo(f"{label}warning: {big}")
    platform = lock_platform(lock)
    echo(f"{label}building {candidate} from {build_file.relative_to(root)}"
         + (f" for {platform} (the lock's wheels are {PLATFORM_ARCH[platform]})" if platform else ""))
    private = tempfile.mkdtemp(prefix="envman-secrets-")  # 0700: the index URLs' file lives only as long as the build
    try:
        if indexes is not None:
            secrets[SECRET] = Path(private) / "indexes"
            fd = os.open(secrets[SECRET], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(indexes)
            echo(f"{label}the private indexes the lock names go to the build as a BuildKit secret (never a layer)")
        result = _build_image(engine, root, root / names.lock, lock, build_file, candidate, opts, echo, label,
                              build_args=args, secrets=secrets, **({"platform": platform} if platform else {}))
    finally:
        shutil.rmtree(private, ignore_errors=True)
    out.built = True
    echo(f"{label}built {candidate} in {result.seconds:.1f} s")
    try:
        if opts.smoke:
            res = smoke_runner.run_smoke_in_image(engine, candidate, require_gpu=opts.require_gpu)
            out.smoke = res
            report = root / names.smoke_report
            smoke_runner.save_report(res, report)
            echo(f"{label}smoke test ({'with' if res.gpus else 'without'} GPU access), report in {report.name}:")
            echo(res.summary())
            if res.failed:
                failed = f"{out.image}-unverified"
                engine.tag(result.image_id, failed)
                out.exit_code = EXIT_SMOKE
                out.notes.append(f"smoke test failed: {failed} keeps the image for inspection; no good tag")
                echo(f"{label}{out.notes[-1]}")
                return None
        else:
            out.notes.append("not smoke-tested (--no-smoke)")
        engine.tag(result.image_id, out.image)  # the image this run tested, by its ID
        echo(f"{label}tagged {out.image}")
        return result.image_id
    finally:
        engine.remove_image(candidate)  # this run's own tag only; the image keeps its good (or failed) tag


def _build_image(engine: ContainerEngine, root: Path, lock_path: Path, lock: Lock, build_file: Path, tag: str,
                 opts: BuildOptions, echo: Callable[[str], None], label: str, **kwargs: Any) -> BuildResult:
    """One build at the lock's date (the engine clamps what it can); with --verify-repro, two from scratch that
    must agree (the first under this run's own ``tag`` too), the agreed image ID then recorded in the lock."""
    base = lock.base_image.get("ref") or ""
    if lock.base_image.get("digest") and "@" not in base:
        base = f"{base}@{lock.base_image['digest']}"
    said = engine.provide_base(base)
    if said:
        echo(f"{label}{said}")
    sde = lock.source_date_epoch
    if opts.verify_repro:
        from envman.app.repro import record_image, require_date, verify_build

        sde = require_date(lock, lock_path.name)

        def build(t: str) -> BuildResult:
            return engine.build(root, dockerfile=build_file, tags=[t], progress=opts.progress, on_output=echo,
                                no_cache=True, source_date_epoch=sde, **kwargs)

        repro = verify_build(engine, build, tag=tag, base=base, echo=echo, label=label, first_tag=tag,
                             keep_as=f"{lock.name}:{lock.short_hash}-unverified")  # as a failed smoke test's
        record_image(lock_path, engine=engine, image_id=repro.image_id, dockerfile=build_file, root=root)
        echo(f"{label}recorded {repro.image_id} in {lock_path.name} (`envman verify IMAGE` checks an image against it)")
        return repro
    return engine.build(root, dockerfile=build_file, tags=[tag], progress=opts.progress, on_output=echo,
                        source_date_epoch=sde, **kwargs)


def _buildable_dockerfile(root: Path, names: StackFiles, opts: BuildOptions, lock: Lock) -> Path:
    """The Dockerfile to build, once it is known to be this envman's rendering of the lock, with every file it
    reads present and the same base image the lock was made for."""
    base = lock.base_image["ref"]
    if opts.base_image and opts.base_image != base:
        raise UsageError(f"--base-image {opts.base_image} differs from the lock's {base}",
                         hint=f"lock for it first: envman lock --base-image {opts.base_image} (or add base_image to envman.yaml)")
    dockerfile = root / names.dockerfile
    from envman.inputs import read_input

    text = read_input(dockerfile, names.dockerfile, 1 << 20, hint="run `envman lock` to write it again")
    if text != offline_dockerfile(root, names.profile, None):
        from envman.files import ownership

        why = "was edited by hand" if ownership(dockerfile).edited else "was generated by another envman version"
        raise UsageError(f"{names.dockerfile} {why}: it no longer matches envman.yaml and the lock",
                         hint="run `envman lock` (add --force to replace hand edits), then build")
    needed = sorted(set(re.findall(r"--mount=type=bind,source=([^,\s]+)", text)))
    missing = [f for f in needed if not (root / f).is_file()]
    if missing:
        raise UsageError(f"{names.dockerfile} needs {', '.join(missing)}, which is missing",
                         hint="run `envman lock` (init --no-lock skips the Python lock)")
    return dockerfile


def _offline_build_file(root: Path, names: StackFiles, opts: BuildOptions, echo: Callable[[str], None],
                        engine: ContainerEngine) -> Path:
    wh = (opts.wheelhouse or root / DEFAULT_WHEELHOUSE).resolve()
    if not wh.is_dir() or not any(wh.glob("*.whl")):
        raise UsageError(f"no wheelhouse at {wh}", hint="run `envman fetch` first (it downloads every locked wheel)")
    ref = wheelhouse_image(wh)
    if not engine.image_exists(ref):
        echo(f"importing the wheelhouse {wh} as {ref} (bind-mounted into the build, never a layer of the image)")
        engine.import_dir(wh, ref)
    built = offline_built(root, names.profile, ref)
    if built.apt:
        echo(f"note: the image installs {', '.join(built.apt)} with apt, which the wheelhouse does not hold: the "
             "build reaches a Debian/Ubuntu mirror for them (or set base_image in envman.yaml to an image that has them)")
    text = built.writes[0][1]
    path = root / ".envman" / (f"{names.dockerfile}.offline")
    write_atomic(path, text)
    # BuildKit reads <Dockerfile>.dockerignore beside the Dockerfile it builds, else the context's .dockerignore:
    # without this copy, a repository that keeps its own .dockerignore would have it applied here instead of
    # envman's, and the wheelhouse (GBs) would go into the context and, through `COPY . /app`, into the image
    from envman.image.context import ignore_file

    ignore = ignore_file(root, names.dockerfile)
    if ignore.is_file():
        from envman.inputs import read_regular

        write_atomic(path.with_name(path.name + ".dockerignore"), read_regular(ignore))
    return path


def lock_platform(lock: Lock) -> str | None:
    """``linux/arm64`` for a lock of aarch64 wheels (python_lock.platform ``aarch64-manylinux_2_28``); None for
    x86_64, which builds as it always did (the engine's own platform)."""
    arch = str((lock.python_lock or {}).get("platform") or "").split("-")[0]
    return PLATFORMS[arch] if arch in PLATFORMS and arch != "x86_64" else None


def _record_push(lock_path: Path, lock: Lock, remote: str, digest: str) -> dict:
    """The pushed digest goes into the lock (outside its hash: the lock's identity does not change)."""
    repo = remote.rsplit(":", 1)[0]
    pushed = {"ref": remote, "digest": digest, "pinned": f"{repo}@{digest}"}
    updated = lock.with_changes(pushed=pushed)
    assert updated.lock_hash == lock.lock_hash
    write_lock(lock_path, updated)
    return pushed
