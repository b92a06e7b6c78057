"""Jupyter kernels: the probe reads kernelspecs from real files; the check names the kernel, its interpreter
and the fix, and stays quiet for the same environment reached through another name or a symlink."""

from __future__ import annotations

import json
import os
from pathlib import Path

from envman.portable.doctor.checks_jupyter import check_jupyter_kernels
from envman.portable.doctor.knowledge import Knowledge
from envman.portable.doctor.view import FactsView
from envman.portable.facts.jupyter import env_prefix, probe_kernels

VENV = "/home/ml/proj/.venv"
EXE = f"{VENV}/bin/python"


def facts(kernels, **kw):
    f = {"python": {"version": "3.11.9", "bits": 64, "executable": EXE, "prefix": VENV},
         "torch": {"version": "2.7.1+cu128", "cuda": "12.8"}, "pip": {"torch": "2.7.1+cu128"},
         "jupyter_kernels": kernels}
    f.update(kw)
    return f


def kernel(name, interp, prefix, frameworks=None, **kw):
    k = {"name": name, "path": f"/home/ml/.local/share/jupyter/kernels/{name}/kernel.json", "argv0": interp,
         "interpreter": interp, "prefix": prefix, "frameworks": frameworks or {}, "language": "python"}
    k.update(kw)
    return k


def judge(f):
    return check_jupyter_kernels(FactsView(f), Knowledge())


def test_kernel_on_the_system_python_is_named_with_its_interpreter_and_the_fix():
    (w,) = judge(facts([kernel("python3", "/usr/bin/python3", "/usr", display_name="Python 3 (ipykernel)")]))
    assert (w.severity, w.check) == ("warn", "jupyter-kernel-interpreter")
    assert w.verdict == (
        "Jupyter kernel 'python3' (Python 3 (ipykernel)) starts /usr/bin/python3 (environment /usr), not "
        "/home/ml/proj/.venv/bin/python, which has torch 2.7.1+cu128: notebooks on that kernel get no torch there: "
        "`import torch` fails with ModuleNotFoundError")
    assert w.remedy == ("/home/ml/proj/.venv/bin/python -m pip install ipykernel && /home/ml/proj/.venv/bin/python "
                        "-m ipykernel install --user --name python3 --display-name \"Python 3 (ipykernel)\"")


def test_kernel_on_a_cpu_build_says_which_build_it_gets():
    (w,) = judge(facts([kernel("old", "/opt/conda/envs/old/bin/python", "/opt/conda/envs/old",
                               {"torch": "2.4.0+cpu"})], pip={"torch": "2.7.1+cu128", "ipykernel": "6.29.5"}))
    assert w.verdict.endswith("notebooks on that kernel get torch 2.4.0+cpu there instead")
    assert w.remedy == "/home/ml/proj/.venv/bin/python -m ipykernel install --user --name old"


def test_kernel_whose_interpreter_is_gone():
    (w,) = judge(facts([kernel("gone", None, None, argv0="/old/venv/bin/python")]))
    assert "starts '/old/venv/bin/python', which is not found" in w.verdict


def test_near_misses_stay_quiet():
    quiet = [
        kernel("same", f"{VENV}/bin/python3", VENV),  # another name in the same venv
        kernel("link", "/usr/local/bin/py-proj", VENV),  # a symlink that the probe resolved to this env
        kernel("other-gpu-env", "/opt/envs/b/bin/python", "/opt/envs/b", {"torch": "2.6.0+cu126"}),
        kernel("r", "/usr/bin/R", "/usr", language="R"),
        kernel("wrapped", "conda", "/opt/conda"),
    ]
    assert judge(facts(quiet)) == []
    assert judge(facts([kernel("x", "/usr/bin/python3", "/usr")], torch={"version": "2.7.1+cpu", "cuda": None})) == []
    assert judge({k: v for k, v in facts([kernel("x", "/usr/bin/python3", "/usr")]).items()
                  if k != "jupyter_kernels"}) == []


def _venv(root: Path, base: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(f"home = {base}\n")
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    os.symlink(base / "python3.11", root / "bin" / "python")
    os.symlink("python", root / "bin" / "python3")
    return site


def _spec(d: Path, name: str, argv0: str) -> None:
    (d / name).mkdir(parents=True)
    (d / name / "kernel.json").write_text(json.dumps(
        {"argv": [argv0, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": name,
         "language": "python"}))


def test_probe_reads_kernelspecs_and_tells_environments_apart(tmp_path, monkeypatch):
    base = tmp_path / "usr" / "bin"
    base.mkdir(parents=True)
    (base / "python3.11").write_text("")
    site = _venv(tmp_path / "proj" / ".venv", base)
    (site / "torch-2.7.1+cu128.dist-info").mkdir()
    kdir = tmp_path / "jp" / "kernels"
    _spec(kdir, "proj", str(tmp_path / "proj" / ".venv" / "bin" / "python3"))
    _spec(kdir, "system", str(base / "python3.11"))
    (kdir / "broken").mkdir()
    (kdir / "broken" / "kernel.json").write_text("{")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jp"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    got = {k["name"]: k for k in probe_kernels(str(tmp_path / "nowhere"))}
    assert got["proj"]["prefix"] == os.path.realpath(tmp_path / "proj" / ".venv")
    assert got["proj"]["frameworks"] == {"torch": "2.7.1+cu128"}
    assert got["system"]["prefix"] == os.path.realpath(tmp_path / "usr")  # the venv's base, not the venv
    assert got["system"]["frameworks"] == {}
    assert got["broken"] == {"name": "broken", "path": str(kdir / "broken" / "kernel.json"), "error": "not JSON"}


def test_env_prefix_follows_cpython_for_symlinks(tmp_path):
    base = tmp_path / "conda" / "bin"
    base.mkdir(parents=True)
    (base / "python3.11").write_text("")
    link = tmp_path / "link-to-conda-python"
    os.symlink(base / "python3.11", link)
    assert env_prefix(str(link)) == os.path.realpath(tmp_path / "conda")
