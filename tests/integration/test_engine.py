"""envman.engine against a real Docker engine: BuildKit builds with cache and secret mounts, runs, signals."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .engine_helpers import ROOT, image_members_containing, wait_for

pytestmark = pytest.mark.integration

DOCKERFILE = """\
FROM {base}
# A cache mount (persists across builds, never in a layer) and a secret mount (a CA bundle, say): the
# secret's sha256 goes into the image, its content must not.
RUN --mount=type=cache,target=/root/.cache/envman-test \\
    --mount=type=secret,id=ca,required=true \\
    sha256sum /run/secrets/ca | cut -c1-64 > /secret.sha256 \\
 && echo {token} >> /root/.cache/envman-test/builds \\
 && wc -l < /root/.cache/envman-test/builds > /cache-count
CMD ["cat", "/secret.sha256"]
"""


def write_context(tmp_path: Path, base: str, token: str, dockerfile: str = DOCKERFILE) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(dockerfile.format(base=base, token=token))
    return ctx


def test_build_run_and_the_secret_stays_out_of_every_layer(engine, build_client, base_image, built_images, token,
                                                           tmp_path):
    from testcontainers.core.container import DockerContainer

    secret = tmp_path / "ca.pem"
    secret_text = f"-----BEGIN CERTIFICATE-----\nenvman-test-secret-{token}\n-----END CERTIFICATE-----\n"
    secret.write_text(secret_text)
    tag = f"envman-it-build:{token}"
    built_images.append(tag)
    lines: list[str] = []

    result = engine.build(write_context(tmp_path, base_image, token), tags=[tag], secrets={"ca": secret},
                          progress="plain", on_output=lines.append, labels={"org.envman.test": token})

    assert result.client == build_client
    assert engine.image_exists(tag) and engine.image_id(tag) == result.image_id
    assert engine.inspect_image(tag)["Config"]["Labels"]["org.envman.test"] == token
    assert any("exporting to image" in ln for ln in lines)
    want = hashlib.sha256(secret_text.encode()).hexdigest()

    # testcontainers runs the image as a test would run a service …
    with DockerContainer(tag) as c:
        assert c.get_wrapped_container().wait(timeout=60)["StatusCode"] == 0
        out, _ = c.get_logs()
    assert out.decode().strip() == want  # the secret reached the build …

    # … and envman's own run gives the same
    assert engine.run(tag, ["cat", "/secret.sha256"], timeout=60) == (0, want + "\n", "")

    # … but no layer and not the config/history holds it
    assert image_members_containing(engine, tag, f"envman-test-secret-{token}".encode(), tmp_path) == []
    # (the check can see: the token written into a layer file is found)
    assert image_members_containing(engine, tag, want.encode(), tmp_path) != []


def test_cache_mount_persists_between_builds(engine, build_client, base_image, built_images, token, tmp_path):
    secret = tmp_path / "s"
    secret.write_text("x")
    counts = []
    for n in range(2):
        ctx = tmp_path / f"round{n}"
        ctx.mkdir()
        (ctx / "Dockerfile").write_text(DOCKERFILE.format(base=base_image, token=f"{token}-{n}"))
        tag = f"envman-it-cache:{token}-{n}"
        built_images.append(tag)
        engine.build(ctx, tags=[tag], secrets={"ca": secret}, progress="plain")
        counts.append(int(engine.run(tag, ["cat", "/cache-count"], timeout=60)[1]))
    assert counts[1] == counts[0] + 1


def test_failed_build_is_exit_4_with_the_failing_step(engine, build_client, base_image, tmp_path, token):
    from envman.engine.errors import BuildError
    from envman.errors import EXIT_ENGINE

    ctx = write_context(tmp_path, base_image, token,
                        "FROM {base}\nRUN echo building-{token} && echo this-step-fails-{token} >&2 && false\n")
    with pytest.raises(BuildError) as ei:
        engine.build(ctx, tags=[f"envman-it-fail:{token}"], progress="plain")
    assert ei.value.exit_code == EXIT_ENGINE
    assert any(f"this-step-fails-{token}" in ln for ln in ei.value.output_tail)
    assert not engine.image_exists(f"envman-it-fail:{token}")


def test_run_exit_code_env_binds_and_no_network(engine, base_image, tmp_path):
    (tmp_path / "in.txt").write_text("bound\n")
    rc, out, err = engine.run(
        base_image, ["sh", "-c", "cat /in/in.txt; echo $GREETING; echo oops >&2; "
                     "cat /sys/class/net/*/operstate | wc -l; touch /in/x 2>/dev/null || echo read-only; exit 7"],
        env={"GREETING": "hello"}, binds={tmp_path: "/in"}, network=False, timeout=60,
    )
    assert rc == 7 and err == "oops\n"
    assert out.splitlines() == ["bound", "hello", "1", "read-only"]  # only lo: no network


def test_run_timeout_removes_the_container(engine, base_image, token):
    from envman.engine.docker import RunTimeout

    with pytest.raises(RunTimeout):
        engine.run(base_image, ["sh", "-c", "echo started; sleep 60"], timeout=2, labels={"org.envman.test": token})
    assert engine.client.containers.list(all=True, filters={"label": f"org.envman.test={token}"}) == []


CHILD = """\
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job may inherit SIGINT ignored
from envman.engine.docker import Engine
try:
    Engine().run({image!r}, ["sleep", "60"], labels={{"org.envman.test": {token!r}}}, timeout=120)
except KeyboardInterrupt as exc:
    print("interrupted:", type(exc).__name__, file=sys.stderr)
    sys.exit(130)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_signal_during_run_leaves_no_container(engine, base_image, token, sig):
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(image=base_image, token=token)],
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    label = {"label": f"org.envman.test={token}"}
    try:
        assert wait_for(lambda: engine.client.containers.list(filters=label), 30), "the container never started"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    want = "Terminated" if sig == signal.SIGTERM else "KeyboardInterrupt"
    assert proc.returncode == 130 and f"interrupted: {want}" in err
    assert engine.client.containers.list(all=True, filters=label) == []


BUILD_CHILD = """\
import faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1)  # the test asks for the stacks if it ever waits in vain
from envman.engine.docker import Engine
Engine().build({ctx!r}, tags=[{tag!r}], progress="plain", on_output=lambda l: print(l, flush=True))
"""


def test_sigterm_during_build_kills_the_client_and_builds_nothing(engine, build_client, base_image, tmp_path, token):
    tag = f"envman-it-killed:{token}"
    ctx = write_context(tmp_path, base_image, token, "FROM {base}\nRUN echo step-{token} && sleep 60\n")
    proc = subprocess.Popen([sys.executable, "-c", BUILD_CHILD.format(ctx=str(ctx), tag=tag)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        seen = []
        for line in proc.stdout:  # wait until the RUN step is executing
            seen.append(line)
            if f"step-{token}" in line and "RUN" not in line:
                break
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # once seen in CI, never reproduced: keep what it was doing
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"the build child was still running 30 s after SIGTERM; its stacks:\n{err[-4000:]}")
        assert time.monotonic() - t0 < 15
    finally:
        proc.kill()
    assert proc.returncode != 0

    def client_gone():
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and tag.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return False
            except OSError:
                pass
        return True

    assert wait_for(client_gone, 10), "a docker build client is still running"
    assert not engine.image_exists(tag)
    assert engine.client.containers.list(filters={"ancestor": base_image}) == []


def test_tag_and_push_to_a_local_registry(engine, base_image, built_images, registry, token):
    ref = f"{registry}/envman-it/base:{token}"
    built_images.append(ref)
    engine.tag(base_image, ref)
    assert engine.image_id(ref) == engine.image_id(base_image)
    digest = engine.push(ref)
    assert digest.startswith("sha256:") and len(digest) == 71


def test_build_client_is_discovered(build_client):
    # On this project's machines: the docker.io package's 20.10 client, behind a newer one without buildx.
    assert build_client.kind in ("buildx", "native")
    out = subprocess.run([build_client.path, "--version"], capture_output=True, text=True, check=False).stdout
    assert build_client.kind == "buildx" or build_client.version in out


def test_smoke_script_in_the_base_image(engine, base_image, tmp_path):
    """The real smoke script in an image without any framework: non-GPU checks pass, no GPU -> exit 6."""
    import json

    from envman.app.smoke import NO_GPU, run_smoke_in_image

    expect = tmp_path / "stack.json"
    expect.write_text(json.dumps({"schema": 1, "framework": None, "cuda": None, "cudnn": None, "nccl": None,
                                  "python": "3.11", "arch_list": [], "imports": [["ca-certificates-py", "ssl"]],
                                  "lock_hash": "0" * 64}))
    r = run_smoke_in_image(engine, base_image, expect=expect, mount_kit=True, gpus=False)
    assert r.exit_code == NO_GPU and r.cli_exit_code() == 6, r.report
    assert r.report["notes"] == ["GPU checks skipped: no GPU visible"]
    assert r.report["observed"]["python"].startswith("3.11.")
    assert "GPU checks skipped: no GPU visible" in r.summary().splitlines()

    p = subprocess.run([sys.executable, "-m", "envman.cli.main", "smoke", "--image", base_image, "--mount-script",
                        "--expect", str(expect)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       check=False)
    assert p.returncode == 6, p.stderr
    assert "GPU checks skipped: no GPU visible" in p.stdout.splitlines()


def test_smoke_failure_in_an_image_is_exit_5(engine, base_image, tmp_path):
    import json

    expect = tmp_path / "stack.json"
    expect.write_text(json.dumps({"schema": 1, "framework": {"name": "torch", "version": "2.14.1",
                                                              "variant": "cu130"}, "python": "3.11"}))
    p = subprocess.run([sys.executable, "-m", "envman.cli.main", "smoke", "--image", base_image, "--mount-script",
                        "--expect", str(expect), "--json"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120, check=False)
    assert p.returncode == 5, p.stderr
    report = json.loads(p.stdout)
    assert [c["name"] for c in report["checks"] if c["status"] == "fail"] == ["framework"]
    assert "torch does not import" in textwrap.shorten(json.dumps(report), 10_000)
