"""`envman mcp` through the MCP SDK's own client: in process (the server object), and once over real stdio
(the SDK's stdio client spawns `envman mcp` as a subprocess, as Claude Desktop, Cursor or VS Code do)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the envman[mcp] extra (the test extra installs it)")

from mcp import Client, StdioServerParameters  # noqa: E402

from envman.cli.mcpserver import build_server  # noqa: E402

FACTS = Path(__file__).resolve().parent.parent / "fixtures" / "facts"
TOOLS = {"resolve_stack", "explain_refusal", "doctor", "diagnose_dockerfile", "fit", "install_command", "uv_project_diff",
         "write_uv_project"}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))


def call(name: str, args: dict, server=None):
    async def go():
        async with Client(server or build_server()) as client:
            return await client.call_tool(name, args)

    return anyio.run(go)


def test_every_tool_has_a_schema_with_descriptions_and_only_one_writes():
    async def go():
        async with Client(build_server()) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in anyio.run(go)}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description and t.input_schema["type"] == "object"
        assert t.output_schema is not None  # structured answers: the same dicts as the CLI's --json
    assert all(p.get("description") for p in tools["resolve_stack"].input_schema["properties"].values())
    writers = {n for n, t in tools.items() if not t.annotations.read_only_hint}
    assert writers == {"write_uv_project"} and tools["write_uv_project"].description.startswith("WRITES")


def test_resolve_stack_answers_the_resolve_json_contract():
    r = call("resolve_stack", {"targets": ["v100"], "framework": "torch", "python": "3.11"})
    assert not r.is_error
    s = r.structured_content
    # a V100 is sm_70; torch 2.14's cu130 wheel's measured arch list starts at sm_75: the cu126 build it is
    assert (s["framework"]["version"], s["framework"]["variant"]) == ("2.14.1", "cu126")
    assert s["framework"]["index_url"] == "https://download.pytorch.org/whl/cu126" and s["python"] == "3.11"
    assert "sm_70" in s["arch_list"] and s["targets"][0]["sm"] == "sm_70"
    assert json.loads(r.content[0].text) == s


def test_a_refused_stack_is_a_tool_error_with_the_error_and_hint_lines():
    r = call("resolve_stack", {"targets": ["v100"], "framework": "torch==2.14.1+cu130"})
    assert r.is_error
    text = r.content[0].text
    assert "error: no torch stack satisfies 'torch==2.14.1+cu130' for 7.0 (sm_70, NVIDIA Tesla V100" in text
    assert "\nhint: nearest working alternative: allow CUDA 12.6 (torch 2.14.1 cu126)" in text


def test_explain_refusal_names_the_blocker_and_the_change():
    r = call("explain_refusal", {"targets": ["v100"], "framework": "torch==2.14.1+cu130"})
    s = r.structured_content
    assert not r.is_error and s["refused"] is True and s["conflicts"]
    assert {"kind": "cuda", "change": "allow CUDA 12.6 (torch 2.14.1 cu126)"}.items() <= s["alternatives"][0].items()
    ok = call("explain_refusal", {"targets": ["h100"], "framework": "torch"}).structured_content
    assert ok["refused"] is False and ok["stack"].startswith("torch 2.14.1 cu130, CUDA 13.0")


def test_doctor_judges_a_facts_file():
    r = call("doctor", {"facts_file": str(FACTS / "rtx5090_torch251_cu124.json")})
    s = r.structured_content
    assert not r.is_error and s["status"] == "error"
    (f,) = s["findings"]
    assert f["check"] == "arch-not-covered" and "sm_120" in f["verdict"] and "--index-url" in f["remedy"]


def test_doctor_with_a_missing_facts_file_is_a_tool_error(tmp_path):
    r = call("doctor", {"facts_file": str(tmp_path / "nope.json")})
    assert r.is_error and "error: " in r.content[0].text and "\nhint: " in r.content[0].text


def test_diagnose_dockerfile_judges_a_real_dockerfile_for_the_targets():
    path = FACTS.parent / "dockerfiles" / "deepspeed.Dockerfile"  # microsoft/DeepSpeed's pattern: a torch for CUDA 11.7
    r = call("diagnose_dockerfile", {"paths": [str(path)], "targets": ["h100"]})
    (rep,) = r.structured_content["dockerfiles"]
    assert not r.is_error and rep["path"] == str(path) and rep["targets"].startswith("h100")
    assert {(f["severity"], f["check"]) for f in rep["findings"] if f["severity"] != "info"} == {
        ("error", "arch-not-covered"), ("warn", "dockerfile-two-cudas")}  # what envman doctor --dockerfile says
    missing = call("diagnose_dockerfile", {"paths": [str(path.parent / "nope.Dockerfile")], "targets": ["h100"]})
    assert missing.is_error and "error: " in missing.content[0].text and "\nhint: " in missing.content[0].text


def test_fit_estimates_the_run_on_the_targets():
    r = call("fit", {"model": "llama-3.1-8b", "method": "lora", "precision": "bf16", "targets": ["a100", "rtx-4090"]})
    s = r.structured_content
    assert not r.is_error and s["model"]["name"] == "Llama 3.1 8B" and s["compare"] == []
    assert [(t["id"], t["fits"]) for t in s["targets"]] == [("a100-sxm4-80gb", True), ("rtx-4090", False)]
    assert s["advice"] == []  # levers are ranked for the first target, which fits
    small = call("fit", {"model": "llama-3.1-8b", "method": "lora", "precision": "bf16", "targets": ["rtx-4090"]})
    assert {a["lever"] for a in small.structured_content["advice"]} and not small.structured_content["targets"][0]["fits"]
    r = call("fit", {"model": "not-a-model"})
    assert r.is_error and r.content[0].text.startswith("Error executing tool fit: error: ")


def test_install_command_is_pytorchs_own_line_for_the_variant():
    r = call("install_command", {"framework": "torch", "companions": ["torchvision"], "targets": ["v100"],
                                 "python": "3.11"})
    s = r.structured_content
    assert s["pip"] == ("python -m pip install torch==2.14.1+cu126 torchvision==0.29.1+cu126 "
                        "--index-url https://download.pytorch.org/whl/cu126")
    assert s["uv"] == s["pip"].replace("python -m pip install", "uv pip install")
    assert any(n.startswith("needs an NVIDIA driver >= ") for n in s["notes"])
    plain = call("install_command", {"targets": ["h100"]}).structured_content
    assert plain["pip"] == "python -m pip install torch==2.14.1" and plain["index_url"] is None


def test_install_command_for_tensorflow_holds_its_cuda_wheels():
    s = call("install_command", {"framework": "tensorflow", "targets": ["a100"]}).structured_content
    (req,) = s["requirements"]
    assert req.startswith("tensorflow[and-cuda]==") and s["pip"].endswith(" -c constraints.txt")
    # [and-cuda] only sets floors: cuDNN is held by a constraint, which installs nothing itself (nvcc is in the
    # constraints too, and must not land in the environment)
    assert "nvidia-cudnn-cu12>=9.3,<10" in s["constraints"]  # a floor within its major (lock/pins.py)
    assert not any(re.split("[=<>]", c)[0] in s["pip"] for c in s["constraints"])


def test_install_command_without_a_gpu_says_how_to_name_one(monkeypatch):
    from envman.portable.facts import nvidia

    monkeypatch.setattr(nvidia, "scan_gpus", lambda *a, **k: nvidia.GpuScan(driver=None, gpus=[], source=None, error="no devices"))
    r = call("install_command", {})
    assert r.is_error
    assert "error: no NVIDIA GPU detected on this machine" in r.content[0].text and "--target" in r.content[0].text


def test_uv_project_diff_writes_nothing_and_write_uv_project_writes(tmp_path):
    from envman.lock.lockfile import Lock, write_lock

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "0"\ndependencies = ["torch"]\n')
    write_lock(tmp_path / "envman.lock", Lock.create({"lock_version": 1, "stack": {
        "framework": {"name": "torch", "version": "2.14.1", "variant": "cu126",
                      "index_url": "https://download.pytorch.org/whl/cu126"}, "companions": {}, "python": "3.11"}}))
    before = (tmp_path / "pyproject.toml").read_text()
    d = call("uv_project_diff", {"project": str(tmp_path)}).structured_content
    assert d["current"] is False and '+url = "https://download.pytorch.org/whl/cu126"' in d["diff"]
    assert (tmp_path / "pyproject.toml").read_text() == before
    w = call("write_uv_project", {"project": str(tmp_path)}).structured_content
    assert w["written"] is True and (tmp_path / "pyproject.toml").read_text() != before
    assert call("uv_project_diff", {"project": str(tmp_path)}).structured_content["current"] is True


def test_envman_mcp_over_real_stdio(tmp_path):
    """The SDK's stdio client spawns the command a client configuration names, with the initialize handshake
    that today's clients use."""
    import os

    params = StdioServerParameters(command=sys.executable, args=["-m", "envman.cli.main", "mcp"],
                                   env={"ENVMAN_MATRIX_DIR": os.environ["ENVMAN_MATRIX_DIR"],
                                        "ENVMAN_CACHE_DIR": str(tmp_path / "cache")})

    async def go():
        async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            answer = await client.call_tool("install_command", {"targets": ["v100"], "python": "3.11"})
            return names, answer

    names, answer = anyio.run(go)
    assert names == TOOLS
    assert answer.structured_content["pip"] == ("python -m pip install torch==2.14.1+cu126 "
                                                "--index-url https://download.pytorch.org/whl/cu126")


def test_without_the_sdk_the_command_says_which_extra_to_install(monkeypatch, capsys):
    from envman.cli.main import main

    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp raises ImportError
    assert main(["mcp"]) == 1
    err = capsys.readouterr().err
    assert err == ("error: envman mcp needs the MCP Python SDK, which is not installed\n"
                   "hint: pip install 'envman[mcp]'\n")
