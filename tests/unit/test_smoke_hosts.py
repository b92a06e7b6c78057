"""A plug-in that its host loads itself, imported on its own by the smoke test (issue 20, pattern 7).

deezer/spleeter's image (TensorFlow 2.12.1) failed its smoke test on ``import tensorflow_io_gcs_filesystem``: that
package's ``__init__`` imports TensorFlow and calls ``tf.experimental.register_filesystem_plugin``, and TensorFlow
has already registered its own ``gs`` file system, so TensorFlow's code raises ``AlreadyExistsError`` (read from
the 0.32.0 wheel's tensorflow_io_gcs_filesystem/core/python/ops/__init__.py). TensorFlow requires that package
(its Requires-Dist) and imports fine. Here the same shape with two tiny fake distributions on ``PYTHONPATH``, run
through the real smoke program from a kit copy, as the image runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envman.app.smoke import write_kit
from envman.image.kit import SMOKE_MODULE
from envman.portable import smoke

HOST = '''\
class AlreadyExistsError(RuntimeError):
    pass

_registered = set()

def register_filesystem(scheme):
    if scheme in _registered:
        raise AlreadyExistsError("File system for %s already registered" % scheme)
    _registered.add(scheme)

def load_plugin():
    import pkg_resources_removed_here  # noqa: F401 - what setuptools 82 did to pkg_resources

register_filesystem("gs")  # its built-in one, as TensorFlow registers gs when it loads
'''


def dist(site: Path, name: str, code: str, requires: tuple[str, ...] = ()) -> None:
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(code)
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n%s" % (
        name, "".join(f"Requires-Dist: {r}\n" for r in requires)))
    (info / "top_level.txt").write_text(name + "\n")


def run(tmp_path: Path, plugin: str, requires: tuple[str, ...] = ('plugfs>=0.32; platform_machine != "arm64"',),
        host: str = HOST) -> tuple[int, dict]:
    site = tmp_path / "site"
    dist(site, "hostfw", host, requires)
    dist(site, "plugfs", plugin)
    expect = tmp_path / "stack.json"
    expect.write_text(json.dumps({"schema": 1, "framework": None, "python": "3",
                                  "imports": [["hostfw", "hostfw"], ["plugfs", "plugfs"]]}))
    kit = write_kit(tmp_path / "kit")
    p = subprocess.run([sys.executable, "-s", "-m", SMOKE_MODULE, "--json", "--expect", str(expect)],
                       capture_output=True, text=True, timeout=60, check=False,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(kit), str(site)])})
    report = json.loads(p.stdout)
    return p.returncode, {c["name"]: c for c in report["checks"]}


REGISTERS_AGAIN = "import hostfw\nhostfw.register_filesystem('gs')\n"


def test_a_plugin_its_host_refuses_to_load_again_is_a_warning_not_a_failure(tmp_path):
    code, checks = run(tmp_path, REGISTERS_AGAIN)
    assert code == smoke.EXIT_NO_GPU  # every non-GPU check passed (no framework, no GPU here)
    c = checks["import plugfs"]
    assert c["status"] == "warn"
    assert c["observed"] == "AlreadyExistsError: File system for gs already registered"
    assert "raised by hostfw 1.0, which requires it and imports" in c["detail"]
    assert checks["import hostfw"]["status"] == "pass"


def test_the_same_error_from_a_package_that_does_not_require_it_fails(tmp_path):
    """tensorflow-addons' ops built for another TensorFlow: tf.load_op_library raises in TensorFlow's code, but
    TensorFlow does not require tensorflow-addons: broken."""
    code, checks = run(tmp_path, REGISTERS_AGAIN, requires=("plugfs-other",))
    assert code == smoke.EXIT_FAIL and checks["import plugfs"]["status"] == "fail"


def test_an_error_raised_in_the_package_own_code_fails(tmp_path):
    code, checks = run(tmp_path, "import hostfw\nraise RuntimeError('numpy 2 removed np.float')\n")
    assert code == smoke.EXIT_FAIL
    assert checks["import plugfs"]["observed"] == "RuntimeError: numpy 2 removed np.float"


def test_an_import_error_fails_even_from_the_host_code(tmp_path):
    """ChatGLM-6B's cpm_kernels importing pkg_resources, which setuptools 82 removed: a missing module is broken
    wherever it is raised."""
    code, checks = run(tmp_path, "import hostfw\nhostfw.load_plugin()\n")
    assert code == smoke.EXIT_FAIL
    assert checks["import plugfs"]["observed"] == "ModuleNotFoundError: No module named 'pkg_resources_removed_here'"


def test_a_host_that_does_not_import_excuses_nothing(tmp_path):
    host = "def register_filesystem(scheme):\n    raise RuntimeError('host broken')\n\nregister_filesystem('gs')\n"
    code, checks = run(tmp_path, REGISTERS_AGAIN, host=host)
    assert code == smoke.EXIT_FAIL
    assert checks["import hostfw"]["status"] == checks["import plugfs"]["status"] == "fail"


def test_a_recorded_host_refusal_is_a_warning_and_a_plain_error_a_failure():
    exp = smoke.load_expect({"schema": 1, "framework": None, "python": "3.11",
                             "imports": [["tensorflow-io-gcs-filesystem", "tensorflow_io_gcs_filesystem"]]})
    refusal = {"error": "AlreadyExistsError: File system for gs already registered", "host": "tensorflow 2.12.1"}
    env = {"python": "3.11.7", "gpu_visible": False, "gpu_evidence": "none"}
    r = smoke.evaluate(exp, env, {}, {"tensorflow_io_gcs_filesystem": refusal})
    assert r["exit_code"] == smoke.EXIT_NO_GPU
    assert [c["status"] for c in r["checks"] if c["name"].startswith("import")] == ["warn"]
    r = smoke.evaluate(exp, env, {}, {"tensorflow_io_gcs_filesystem": refusal["error"]})
    assert r["exit_code"] == smoke.EXIT_FAIL


@pytest.mark.parametrize(("err", "says"), [
    ("ModuleNotFoundError: No module named 'pkg_resources'", "add 'setuptools<82' to envman.yaml packages:"),
    ("ModuleNotFoundError: No module named 'distutils.util'", "Python 3.12 removed distutils (PEP 632)"),
])
def test_a_module_a_newer_release_removed_names_the_way_back(err, says):
    [c] = smoke.evaluate_imports({"imports": [["cpm-kernels", "cpm_kernels"]]}, {"cpm_kernels": err})
    assert c["status"] == "fail" and says in c["detail"]


def test_another_missing_module_gets_no_remedy():
    [c] = smoke.evaluate_imports({"imports": [["x", "x"]]}, {"x": "ModuleNotFoundError: No module named 'yaml'"})
    assert c["detail"] == "from distribution x"


def test_each_import_is_announced_so_a_crash_without_a_report_names_it(capsys):
    """keras-hub's image: `import tensorflow` then `import triton` (through torchvision) segfaults, triton first
    does not (tensorflow-cpu 2.20.0, triton 3.8.0; measured 2026-12-02): the process dies without a report, and
    the last line on stderr says where."""
    smoke.observe_imports({"imports": [["json", "json"], ["csv", "csv"]]})
    assert capsys.readouterr().err.splitlines()[-2:] == ["smoke: importing json", "smoke: importing csv"]


def test_the_framework_is_imported_first_as_a_training_script_does():
    golden = Path(__file__).resolve().parent.parent / "golden"
    seen = 0
    for f in sorted(golden.glob("*/.envman__stack.json")):
        stack = json.loads(f.read_text())
        if stack.get("framework") and stack["imports"]:
            seen += 1
            assert stack["imports"][0][0] == stack["framework"]["name"], f
    assert seen >= 3
