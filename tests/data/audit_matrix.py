"""Re-audit of the shipped matrix: 100 facts drawn at random (fixed seed) from every fact of matrices/ that a
primary source reachable from here can confirm, each checked against that source by code that shares
nothing with envman's readers (a regex over the raw README at each tag, ``git show`` of test-infra's script,
PyPI's simple API and wheel METADATA by HTTP range reads). Writes docs/matrix-audit.md.

    python tests/data/audit_matrix.py NVIDIA-CLONE TEST-INFRA-CLONE [OUT.md]

Not a test (it needs the two clones and PyPI); docs/matrix.md says how it was run.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from email.parser import Parser
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
SEED = 2026_12_01
N = 100


def git(d: str, *a: str) -> str:
    return subprocess.run(["git", "--git-dir", d, *a], check=True, capture_output=True, text=True).stdout


def load(name: str):
    return yaml.safe_load((ROOT / "matrices" / name).read_text())


def facts() -> list[tuple[str, str, tuple]]:
    """(kind, text, payload) for every checkable fact."""
    out = []
    for g in load("gpus.yaml")["gpus"]:
        d = g.get("driver") or {}
        if d.get("proprietary"):
            out.append(("proprietary", f"gpus.yaml gpus[{g['id']}]: not in NVIDIA's open-module list", (g,)))
        for dev in (d.get("pci") or {}):
            out.append(("pci", f"gpus.yaml gpus[{g['id']}].driver.pci: {dev} is listed as {d['names']}", (g, dev)))
        if d.get("listed"):
            out.append(("listed", f"gpus.yaml gpus[{g['id']}].driver.listed: first listed in {d['listed']}", (g,)))
    torch = load("torch.yaml")["releases"]
    for r in torch:
        for v in r["variants"]:
            if v["name"] == "cpu":
                continue
            out.append(("variant", f"torch.yaml {r['line']} {v['name']}: a release build", (r["line"], v["name"])))
            if "aarch64" in (v.get("platforms") or []):
                out.append(("aarch64", f"torch.yaml {r['line']} {v['name']}.platforms: aarch64", (r["line"], v["name"])))
            if v["name"] == r["pypi_default"] and "measured" in v:
                for k in ("cudnn", "nccl", "cuda"):
                    if v.get(k):
                        out.append(("pin", f"torch.yaml {r['line']} {v['name']}.{k}: {v[k]}", (r, v, k)))
        for py in r["python"]:
            out.append(("python", f"torch.yaml {r['line']}.python: {py}", (r, py)))
    for c in load("cuda.yaml")["releases"]:
        if Version(c["version"]) >= Version("12.0"):
            out.append(("update", f"cuda.yaml releases[{c['version']}].latest_update: {c['latest_update']}", (c,)))
    for c in load("cudnn.yaml")["releases"]:
        if Version(c["version"]) >= Version("9.0"):
            for m in c["cuda_majors"]:
                if m >= 12:
                    out.append(("cudnn", f"cudnn.yaml releases[{c['version']}].cuda_majors: {m}", (c, m)))
    return out


class Sources:
    def __init__(self, nvidia: str, infra: str):
        self.nvidia, self.infra = nvidia, infra
        self.tags = sorted((t for t in git(nvidia, "tag").split() if re.fullmatch(r"\d+\.\d+(\.\d+)?", t)), key=Version)
        self._readme: dict[str, str] = {}
        self._simple: dict[str, dict] = {}

    def readme(self, tag: str) -> str:
        if tag not in self._readme:
            self._readme[tag] = git(self.nvidia, "show", f"{tag}:README.md")
        return self._readme[tag]

    def row(self, tag: str, dev: str, names: list[str] | None = None) -> str | None:
        """The first table row of ``dev`` at ``tag`` (under one of ``names`` when given)."""
        return next((ln for ln in self.readme(tag).splitlines() if re.search(rf"\|\s*{dev}(\s|\|)", ln)
                     and (not names or any(f"| {n} " in ln for n in names))), None)

    def script(self, line: str) -> str:
        return git(self.infra, "show", f"release/{line}:tools/scripts/generate_binary_build_matrix.py")

    def simple(self, project: str) -> dict:
        import json
        import urllib.request

        if project not in self._simple:
            req = urllib.request.Request(f"https://pypi.org/simple/{project}/",
                                         headers={"Accept": "application/vnd.pypi.simple.v1+json"})
            self._simple[project] = json.load(urllib.request.urlopen(req, timeout=60))
        return self._simple[project]


def _names(g: dict) -> list[str]:
    return [a for a in (g.get("driver") or {}).get("names") or []]


def verify(kind: str, p: tuple, s: Sources) -> tuple[bool | None, str]:
    """(right, the primary source line); None: no primary source could say."""
    if kind == "pci":
        g, dev = p
        newest = s.tags[-1]
        ln = s.row(newest, dev, _names(g))
        ok = ln is not None
        return ok, f"{newest}:README.md `{ln.strip() if ln else 'no row'}`"
    if kind == "listed":
        (g,) = p
        devs = list((g["driver"].get("pci") or {}))
        first = next((t for t in s.tags if any(s.row(t, d) for d in devs)), None)
        ln = next((s.row(first, d) for d in devs if first and s.row(first, d)), None)
        return first == g["driver"]["listed"], f"{first}:README.md `{ln.strip() if ln else ''}` (first of {len(s.tags)} tags)"
    if kind == "proprietary":
        (g,) = p
        text = s.readme(s.tags[-1])
        hits = [a for a in [g["name"], *g.get("aliases", [])] if a[:1].isupper() and f"| {a} " in text]
        turing = "can be used on any Turing or later GPU" in text
        return (not hits and turing and Version(g["cc"]) < Version("7.5")), \
            f"{s.tags[-1]}:README.md `The NVIDIA open kernel modules can be used on any Turing or later GPU` (cc {g['cc']})"
    if kind in ("variant", "aarch64"):
        line, name = p
        try:
            text = s.script(line)
        except subprocess.CalledProcessError:
            rel = next(r for r in load("torch.yaml")["releases"] if r["line"] == line)
            v = next(v for v in rel["variants"] if v["name"] == name)
            if kind == "variant" and name == rel["pypi_default"]:  # no branch: the PyPI wheel itself says
                ok, src = _pin(rel, v, "cuda", s)
                return ok, f"no release/{line} branch; {src}"
            return None, f"no release/{line} branch in pytorch/test-infra"
        cuda = f"{name[2:-1]}.{name[-1]}"
        key = "CUDA_ARCHES_DICT" if kind == "variant" else "CUDA_AARCH64_ARCHES"
        m = re.search(rf"^{key}(?:_DICT)?\s*(?::[^=]+)?=\s*(\{{.*?\}}|\[.*?\])", text, re.S | re.M)
        if m is None and kind == "aarch64":
            m = re.search(r'CUDA_AARCH64:\s*"(cu\d+)"', text)
            return (m is not None and m.group(1) == name), f"release/{line} `CUDA_AARCH64: \"{m.group(1) if m else '?'}\"`"
        block = m.group(1) if m else ""
        test = re.search(r'"test":\s*\[([^\]]*)\]', block)
        got = test.group(1) if test else block
        return f'"{cuda}' in got, f"release/{line} {key}: `{' '.join(got.split())}`"
    if kind == "python":
        r, py = p
        files = [f["filename"] for f in s.simple("torch")["files"]]
        tag = "cp" + py.replace(".", "")
        hit = [f for f in files if f.startswith(f"torch-{r['patches'][-1]['version']}-") and f"-{tag}-" in f
               and "linux" in f and "x86_64" in f]  # cp37's ABI tag is cp37m
        return bool(hit), f"https://pypi.org/simple/torch/ `{hit[0] if hit else 'no ' + tag + ' Linux x86_64 wheel'}`"
    if kind == "pin":
        return _pin(*p, s)
    if kind == "update":
        (c,) = p
        vs = [Version(f["filename"].split("-")[1]) for f in s.simple("cuda-toolkit")["files"] if f["filename"].endswith(".whl")]
        mine = [v for v in vs if (v.major, v.minor) == tuple(map(int, c["version"].split("."))) and not v.is_prerelease]
        if not mine:
            return None, f"https://pypi.org/simple/cuda-toolkit/ has no {c['version']}.x"
        return max(mine) == Version(c["latest_update"]), f"https://pypi.org/simple/cuda-toolkit/ newest {c['version']}.x: `{max(mine)}`"
    c, m = p
    files = [f["filename"] for f in s.simple(f"nvidia-cudnn-cu{m}")["files"] if f["filename"].endswith(".whl")]
    hit = [f for f in files if f.split("-")[1].startswith(c["version"] + ".")
           and not (Version(f.split("-")[1]).is_devrelease or Version(f.split("-")[1]).is_prerelease)]
    return bool(hit), f"https://pypi.org/simple/nvidia-cudnn-cu{m}/ `{hit[0] if hit else 'none'}`"


def _pin(r: dict, v: dict, k: str, s: Sources) -> tuple[bool | None, str]:
    sys.path.insert(0, str(ROOT))
    from tools.matrix.pypi import fetch_project, read_remote_wheel

    ver = r["patches"][-1]["version"]
    proj = fetch_project("torch")
    f = next((f for f in proj.files if str(f.version) == ver and "cp311" in f.python_tags
              and any("x86_64" in pl and "linux" in pl for pl in f.platforms)), None)
    if f is None:
        return None, f"no torch {ver} cp311 Linux x86_64 wheel on PyPI"
    rw = read_remote_wheel(f, ("torch/version.py",))
    if k == "cuda":
        m = re.search(r"^cuda\s*(?::[^=]+)?=\s*'([^']*)'", rw.members.get("torch/version.py", ""), re.M)
        return (m is not None and m.group(1) == v["cuda"]), f"{f.filename} torch/version.py `cuda = '{m.group(1) if m else '?'}'`"
    prefix = "nvidia-cudnn-cu" if k == "cudnn" else "nvidia-nccl-cu"
    reqs = [Requirement(x) for x in Parser().parsestr(rw.metadata).get_all("Requires-Dist") or []]
    hit = next((q for q in reqs if q.name.startswith(prefix)), None)
    if hit is None:  # a build that links it statically (NCCL before 2.0): its METADATA cannot say
        return None, f"{f.filename} METADATA names no {prefix}* (linked statically)"
    return (hit is not None and str(hit.specifier) == f"=={v[k]}"), f"{f.filename} METADATA `Requires-Dist: {hit}`"


def main() -> None:
    nvidia, infra = sys.argv[1], sys.argv[2]
    out = Path(sys.argv[3]) if len(sys.argv) > 3 else ROOT / "docs" / "matrix-audit.md"
    pop = facts()
    sample = random.Random(SEED).sample(pop, N)
    s = Sources(nvidia, infra)
    rows, wrong, none = [], 0, 0
    for i, (kind, text, payload) in enumerate(sample, 1):
        ok, line = verify(kind, payload, s)
        wrong += ok is False
        none += ok is None
        rows.append(f"| {i} | {text.replace('|', '/')} | {line.replace('|', '/')} | {'ok' if ok else 'WRONG' if ok is False else 'no source'} |")
    kinds: dict[str, int] = {}
    for k, _, _ in pop:
        kinds[k] = kinds.get(k, 0) + 1
    head = [
        "# Re-audit of the shipped matrix: 100 facts against their primary sources", "",
        f"`python tests/data/audit_matrix.py <NVIDIA/open-gpu-kernel-modules clone> <pytorch/test-infra clone>` "
        f"(seed {SEED}): {N} facts drawn at random from the {len(pop)} facts of matrices/ that a source reachable "
        "from here can confirm (" + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + "), each checked by "
        "code that shares nothing with envman's readers: a regex over the raw README.md at each tag of the clone, "
        "`git show release/X.Y:…/generate_binary_build_matrix.py`, PyPI's simple API and the wheels' METADATA and "
        "torch/version.py read by HTTP range requests.", "",
        f"**Result: {wrong} wrong, {none} without a source, {N - wrong - none} confirmed.**", "",
        "| # | fact (file, key) | primary source line | verdict |", "|---|---|---|---|",
    ]
    out.write_text("\n".join(head + rows) + "\n")
    print(f"{wrong} wrong, {none} without a source, of {N}; population {len(pop)} {kinds}")


if __name__ == "__main__":
    main()
