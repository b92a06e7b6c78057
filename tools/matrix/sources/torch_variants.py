"""torch.yaml held to PyTorch's release build matrices (torch_builds.ReleaseBuild per line): the CUDA
variants of each line and the platforms they have wheels for, and the Python versions.

A CUDA version the matrix lists for linux-aarch64 that is also one of the line's x86_64 variants is that
variant's aarch64 (SBSA) build; one without an x86_64 twin (12.9 on the test channel of release/2.12 and
2.13) is not a release variant and is left out. The aarch64 wheels of variants not on PyPI live on
download.pytorch.org: their arch lists cannot be measured from here and are marked uncertain.
"""

from __future__ import annotations

from packaging.version import Version

from envman.model import FrameworkRelease, Matrix
from tools.matrix.sources.torch_builds import ReleaseBuild
from tools.matrix.yamledit import set_variant_key


def lines(matrix: Matrix) -> dict[str, FrameworkRelease]:
    """The first release of each torch line (patches share the line's variants)."""
    out: dict[str, FrameworkRelease] = {}
    for r in sorted(matrix.frameworks.get("torch", ()), key=lambda r: r.version):
        out.setdefault(f"{r.version.major}.{r.version.minor}", r)
    return out


def aarch64_builds(b: ReleaseBuild) -> set[str]:
    return b.variants("aarch64") & b.variants("x86_64")


def check(matrix: Matrix, builds: dict[str, ReleaseBuild], file: str = "torch.yaml") -> list[str]:
    probs = []
    for line, rel in sorted(lines(matrix).items(), key=lambda kv: Version(kv[0])):
        b = builds.get(line)
        if b is None:
            continue
        where = f"{file}: line {line}"
        have = {v.name for v in rel.variants if v.cuda is not None}
        want = b.variants("x86_64")
        for name in sorted(have - want):
            probs.append(f"{where}: variants: {name} is not in PyPI's release build matrix for {line} "
                         f"(x86_64 CUDA {', '.join(b.cuda)}: {b.url})")
        for name in sorted(want - have):
            probs.append(f"{where}: variants: the release build matrix builds {name} ({b.url}); the line lacks it")
        arm = {v.name for v in rel.variants if v.cuda is not None and "aarch64" in v.platforms}
        for name in sorted(arm - aarch64_builds(b)):
            probs.append(f"{where}: variants[{name}].platforms: aarch64, but the release build matrix builds "
                         f"linux-aarch64 CUDA {', '.join(b.cuda_aarch64) or 'none'} ({b.url})")
        for name in sorted((aarch64_builds(b) & have) - arm):
            probs.append(f"{where}: variants[{name}].platforms: the release build matrix builds it for "
                         f"linux-aarch64 too ({b.url}); platforms lacks aarch64")
        missing = [p for p in b.python if p not in rel.python]  # PyPI may carry more (3.13 for 2.5): never fewer
        if missing:
            probs.append(f"{where}: python: lacks {', '.join(missing)}, which the release build matrix builds ({b.url})")
    return [p.replace("PyPI's release", "PyTorch's release") for p in probs]


def plan(matrix: Matrix, builds: dict[str, ReleaseBuild], text: str) -> tuple[str, list[str]]:
    """torch.yaml with an aarch64 platform added to every variant the build matrix builds for linux-aarch64,
    and a report line per change (and per difference left for a person)."""
    report = []
    for line, rel in sorted(lines(matrix).items(), key=lambda kv: Version(kv[0])):
        b = builds.get(line)
        if b is None:
            report.append(f"= torch {line}: no release/{line} branch in the build-matrix source; not checked")
            continue
        key = (int(line.split(".")[0]), int(line.split(".")[1]))
        for v in rel.variants:
            if v.cuda is None or v.name not in aarch64_builds(b) or "aarch64" in v.platforms:
                continue
            text = set_variant_key(text, key, v.name, "platforms", ["platforms: [x86_64, aarch64]"])
            text = set_variant_key(text, key, v.name, "aarch64", _aarch64_rows(b, v.name))
            report.append(f"+ torch {line} {v.name}: linux-aarch64 wheels ({b.url})")
        for name in sorted(b.variants("x86_64") - {v.name for v in rel.variants}):
            report.append(f"! torch {line}: the build matrix builds {name}, the line lacks it (add it by hand: "
                          "its cuDNN/NCCL pins are in its wheel's METADATA)")
        for name in sorted(b.variants("aarch64") - b.variants("x86_64")):
            report.append(f"~ torch {line}: linux-aarch64 CUDA {name} has no x86_64 variant: not a release variant, left out")
        if b.stable and rel.pypi_default != "cu" + b.stable.replace(".", ""):
            report.append(f"~ torch {line}: the build matrix's stable CUDA is {b.stable}; pypi_default says "
                          f"{rel.pypi_default} (read from the PyPI wheel, kept)")
    return text, report


def _aarch64_rows(b: ReleaseBuild, name: str) -> list[str]:
    note = (f"{name} is built for linux-aarch64 (the release build matrix of {b.line}); its aarch64 wheel is on "
            "download.pytorch.org, which envman could not read: SASS/PTX lists not measured, taken as the "
            "x86_64 build's")
    return ["aarch64:", f'  source: "{b.url}"', "  uncertain: true", f'  note: "{note}"']
