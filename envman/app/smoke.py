"""Run the smoke program (envman/portable/smoke.py) on this host or inside an image, and keep its report.

The script is the contract: it prints a JSON report and exits 0 (passed, GPU checks included), 1 (a check
failed) or 6 (non-GPU checks passed, no GPU visible). This module runs it, parses the report and saves it;
it never decides a verdict of its own beyond "the script did not produce a report".
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from envman.errors import EXIT_SMOKE, EXIT_SMOKE_NO_GPU, UsageError
from envman.files import write_atomic
from envman.image.kit import KIT_FIRST, KIT_IN_IMAGE, SMOKE_MODULE, kit_files
from envman.inputs import read_regular_text
from envman.lock.layout import StackFiles

if TYPE_CHECKING:
    from envman.engine.protocol import ContainerEngine

EXPECT_IN_IMAGE = "/opt/envman/stack.json"
REPORT_NAME = StackFiles().smoke_report  # saved beside the lock
PASS, FAIL, NO_GPU = 0, 1, 6  # the script's own exit codes
TIMEOUT = 900  # seconds the smoke program may run


def write_kit(directory: Path) -> Path:
    """The kit as the image gets it (the island and the matrix knowledge), under ``directory``."""
    for rel, text in kit_files().items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(text, encoding="utf-8")
    return directory


@dataclass
class SmokeResult:
    exit_code: int  # the script's: 0, 1 or 6 (1 also when it produced no report)
    report: dict[str, Any]
    where: str  # "host" or the image reference
    gpus: bool  # was the run given GPU access

    @property
    def passed(self) -> bool:
        return self.exit_code == PASS

    @property
    def no_gpu(self) -> bool:
        return self.exit_code == NO_GPU

    @property
    def failed(self) -> bool:
        return not (self.passed or self.no_gpu)

    def cli_exit_code(self) -> int:
        """For `envman build`/`envman smoke --image`: 0, EXIT_SMOKE_NO_GPU (6) or EXIT_SMOKE (5)."""
        return 0 if self.passed else EXIT_SMOKE_NO_GPU if self.no_gpu else EXIT_SMOKE

    def summary(self) -> str:
        return importlib.import_module("envman.portable.smoke").format_summary(self.report)

    def to_json(self) -> dict[str, Any]:
        return {**self.report, "where": self.where, "gpus_requested": self.gpus}


def parse_report(stdout: str) -> dict[str, Any] | None:
    """The report is the JSON object on stdout; tolerate stray lines before it."""
    text = stdout.strip()
    for start in [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]:
        if text[start:start + 1] == "{":
            try:
                obj = json.loads(text[start:])
            except ValueError:
                continue
            if isinstance(obj, dict) and "checks" in obj:
                return obj
    return None


def _no_report(exit_code: int, stdout: str, stderr: str, why: str) -> dict[str, Any]:
    tail = (stderr.strip() or stdout.strip())[-2000:]
    return {"schema": 1, "tool": "envman-smoke", "status": "failed", "exit_code": FAIL, "notes": [],
            "checks": [{"name": "smoke script", "status": "fail", "expected": "a JSON report", "observed": None,
                        "detail": f"{why} (exit {exit_code}); output: {tail}", "gpu": False}]}


def _result(rc: int, out: str, err: str, where: str, gpus: bool) -> SmokeResult:
    report = parse_report(out)
    if report is None:
        return SmokeResult(FAIL, _no_report(rc, out, err, "the smoke script printed no report"), where, gpus)
    if rc not in (PASS, FAIL, NO_GPU) or report.get("exit_code") != rc:
        said = report.get("exit_code")
        report.setdefault("notes", []).append(f"the smoke process exited {rc}, its report said {said}")
        rc = FAIL if rc != NO_GPU else rc
    return SmokeResult(rc, report, where, gpus)


# ----------------------------------------------------------------------------------------- expectations
def is_expected_stack(data: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(data, dict) and "python" in data and "framework" in data


def expected_stack(data: dict[str, Any]) -> dict[str, Any]:
    """The expected-stack document from a file that is one, or derived from an envman.lock's ``stack``
    section (which lacks the import list: the baked .envman/stack*.json beside the lock is preferred)."""
    if is_expected_stack(data):
        return data
    if not isinstance(data, dict):
        raise UsageError("no expected stack in this file (it is not a JSON object)", hint="see docs/smoke.md")
    for key in ("smoke", "expect", "stack"):
        sub = data.get(key)
        if is_expected_stack(sub):
            fw = sub.get("framework")
            cpu = isinstance(fw, dict) and fw.get("variant") == "cpu"
            keep = ("framework", "python", "arch_list", "imports") + (() if cpu else ("cuda", "cudnn", "nccl"))
            out: dict[str, Any] = {"schema": 1, "lock_hash": data.get("lock_hash"), "cuda": None, "cudnn": None, "nccl": None,
                   "imports": []}
            out.update({k: sub[k] for k in keep if k in sub})
            if isinstance(fw, dict):
                out["framework"] = {k: fw[k] for k in ("name", "version", "variant") if k in fw}
            return out
    raise UsageError(
        "no expected stack in this file (want the smoke JSON: schema, framework, cuda, cudnn, nccl, python, "
        "arch_list, imports; or an envman.lock)",
        hint="see docs/smoke.md for the format",
    )


def baked_stack_for(lock_path: Path) -> Path:
    """Where `envman lock` writes the expected stack of a lock: envman.lock -> .envman/stack.json,
    envman.P.lock -> .envman/stack.P.json."""
    return lock_path.parent / StackFiles.of_lock(lock_path.name).stack


def write_expect_file(source: Path, dest_dir: Path) -> Path:
    """A file the script can read: ``source`` itself when it is an expected-stack file; for a lock, the stack
    file written beside it when it belongs to this lock (same lock_hash), else one derived from the lock."""
    from envman.inputs import MAX_FACTS, load_json, read_input

    data = load_json(read_input(source, str(source), MAX_FACTS), str(source), hint="give envman.lock or a stack file")
    if is_expected_stack(data):
        return source
    exp = expected_stack(data)  # refuses what is neither a stack nor a lock
    baked = baked_stack_for(source)
    if baked.is_file():
        try:
            other = json.loads(read_regular_text(baked))
        except (OSError, ValueError):
            other = None
        if is_expected_stack(other) and other.get("lock_hash") == data.get("lock_hash"):
            return baked
    out = dest_dir / "stack.json"
    write_atomic(out, json.dumps(exp, indent=2, sort_keys=True) + "\n")
    return out


# ----------------------------------------------------------------------------------------------- runners
def run_smoke_host(expect: Path | str, *, require_gpu: bool = False) -> SmokeResult:
    from envman.process import sigterm_raises

    with tempfile.TemporaryDirectory(prefix="envman-smoke-") as tmp:
        exp = write_expect_file(Path(expect), Path(tmp))
        kit = write_kit(Path(tmp) / "kit")
        # -s: no user site-packages; the kit comes first on the path, the interpreter's own packages after
        argv = [sys.executable, "-s", "-m", SMOKE_MODULE, "--json", "--expect", str(exp),
                *(["--require-gpu"] if require_gpu else [])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(kit), os.environ.get("PYTHONPATH")]))}
        with sigterm_raises():  # subprocess.run kills the child on any exception, Terminated included
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False, env=env,
                                   stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired as exc:
                out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
                err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
                return SmokeResult(FAIL, _no_report(-1, out, err, f"timed out after {TIMEOUT} s"), "host", False)
    return _result(p.returncode, p.stdout, p.stderr, "host", False)


def host_has_nvidia_gpu() -> bool:
    if glob.glob("/dev/nvidia[0-9]*"):
        return True
    from envman.portable.facts.nvidia import scan_gpus

    return bool(scan_gpus().gpus)


def gpu_access(engine: ContainerEngine) -> bool:
    """Give the smoke container GPUs when this host has NVIDIA GPUs and the engine can hand them out."""
    return host_has_nvidia_gpu() and engine.has_nvidia_runtime()


def run_smoke_in_image(
    engine: ContainerEngine,
    image: str,
    *,
    require_gpu: bool = False,
    gpus: bool | None = None,
    expect: Path | str | None = None,
    mount_kit: bool = False,
) -> SmokeResult:
    """The smoke program baked into ``image`` (or this envman's kit, bind-mounted over it with ``mount_kit``)
    against the expected stack baked beside it (or ``expect``, a stack or lock file, bind-mounted).
    ``gpus`` None: decide with gpu_access."""
    from envman.engine.docker import RunTimeout

    if gpus is None:
        gpus = gpu_access(engine)
    with tempfile.TemporaryDirectory(prefix="envman-smoke-") as tmp:
        binds: dict[str | Path, str] = {}
        if mount_kit:
            binds[str(write_kit(Path(tmp) / "kit").resolve())] = KIT_IN_IMAGE
        if expect is not None:
            binds[str(write_expect_file(Path(expect), Path(tmp)).resolve())] = EXPECT_IN_IMAGE
        argv = ["python3", "-c", KIT_FIRST, "--json", "--expect", EXPECT_IN_IMAGE,
                *(["--require-gpu"] if require_gpu else [])]
        env = {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"} if gpus else {}
        try:
            rc, out, err = engine.run(image, argv, gpus=gpus, env=env, binds=binds, timeout=TIMEOUT, network=False)
        except RunTimeout as exc:
            return SmokeResult(FAIL, _no_report(-1, exc.stdout, exc.stderr, exc.message), image, gpus)
    return _result(rc, out, err, image, gpus)


def save_report(result: SmokeResult, path: Path | str) -> Path:
    """Atomically, so an interrupted run never leaves half a report beside the lock."""
    path = Path(path)
    write_atomic(path, json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n")
    return path


def smoke_host(expect: Path | str | None = None, *, require_gpu: bool = False) -> SmokeResult:
    """``envman smoke --host``: the expected stack from ``expect``, else ./envman.lock."""
    if expect is None:
        expect = Path("envman.lock")
        if not expect.is_file():
            raise UsageError("no envman.lock here to take the expected stack from",
                             hint="pass --expect FILE (an expected-stack JSON or an envman.lock)")
    return run_smoke_host(expect, require_gpu=require_gpu)


def smoke_image(image: str, *, expect: Path | str | None = None, require_gpu: bool = False, mount_kit: bool = False,
                engine: Any = None, engine_name: str | None = None) -> SmokeResult:
    """``envman smoke --image``: on the local engine (``engine``; else the one ``engine_name`` names, or the first
    that works: engine/select.py), which must hold ``image``."""
    if engine is None:
        from envman.engine.select import choose_engine

        engine = choose_engine(engine_name).engine
    if not engine.image_exists(image):
        raise UsageError(f"no image {image} on the engine", hint="build it first: envman build")
    return run_smoke_in_image(engine, image, require_gpu=require_gpu, expect=expect, mount_kit=mount_kit)
