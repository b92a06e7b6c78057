"""What the dynamic loader does with the CUDA libraries a package links: found nowhere, or shadowed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..versions import vcmp
from . import variants
from .findings import Finding, error, warn
from .knowledge import Knowledge
from .remedies import drop_ld_path
from .view import FactsView, as_dict, as_list, as_str

# What a package's own documentation says to do when its CUDA libraries are installed but not found.
_OWN_FIX = {"onnxruntime-gpu": "call onnxruntime.preload_dlls() before creating the session (onnxruntime-gpu ≥ 1.21)"}


def _extension_files(v: FactsView) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(dist, version, file) of each extension library that loads here (of a package that ships one build per
    CUDA release, the one for this environment's CUDA)."""
    fw = next((fw for fw in v.frameworks if fw.is_cuda), None)
    for dist, ver, files in variants.dists(v):
        for g in variants.groups(files):
            yield dist, ver, variants.pick(g, fw.cuda if fw else None)


def _framework_files(v: FactsView) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, files in sorted(as_dict(v.f.get("framework_libs")).items()):
        fw = v.framework(name)
        for f in as_list(files):
            if isinstance(f, dict):
                yield name, fw.version if fw else "?", f


def _torch_loads(v: FactsView) -> set[str]:
    """Sonames torch's own libraries resolve (loaded by `import torch`, reused by what asks later)."""
    return {so for _n, _v, f in _framework_files(v) if _n == "torch"
            for so, hit in as_dict(f.get("resolved")).items() if hit}


def _searched(f: dict[str, Any], v: FactsView) -> str:
    own = [str(d) for d in as_list(f.get("runpath")) + as_list(f.get("rpath"))]
    ld = v.env.get("LD_LIBRARY_PATH", "")
    parts = [f"its RUNPATH/RPATH {':'.join(own)}" if own else "no RUNPATH/RPATH of its own"]
    parts.append(f"LD_LIBRARY_PATH={ld}" if ld else "LD_LIBRARY_PATH unset")
    return ", ".join(parts)


def check_unreachable_libs(v: FactsView, k: Knowledge) -> list[Finding]:
    """CUDA libraries a package links against that are installed, but off the loader's path."""
    out = []
    loaded = _torch_loads(v)
    for dist, ver, f in _extension_files(v):
        away = {str(so): [str(p) for p in as_list(ps)] for so, ps in as_dict(f.get("elsewhere")).items() if as_list(ps)}
        if not away:
            continue
        order = [str(n) for n in as_list(f.get("needed"))]
        sonames = sorted(away, key=lambda so: order.index(so) if so in order else len(order))
        # ld.so stops at the first DT_NEEDED it cannot find; after `import torch` the ones torch loaded are there
        still = [so for so in sonames if so not in loaded]
        first = (still or sonames)[0]
        dirs = sorted({p.rsplit("/", 1)[0] for ps in away.values() for p in ps})
        name = str(f.get("file")).rsplit("/", 1)[-1]
        fixes = [f"export LD_LIBRARY_PATH={':'.join(dirs)}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"]
        if dist in _OWN_FIX:
            fixes.append(_OWN_FIX[dist])
        verdict = (f"{name} ({dist} {ver}) links {', '.join(sonames)}; the loader finds none of them ({_searched(f, v)}), "
                   f"though they are installed off its path ({away[first][0]})")
        if still and loaded:
            verdict += f"; importing torch first loads the others, not {', '.join(still)}"
        elif loaded:
            verdict += "; it loads only when torch was imported first (torch's RPATH loads the same libraries)"
            fixes.append("or import torch before it")
        verdict += f": '{first}: cannot open shared object file'"
        out.append((error if still else warn)("ext-cuda-libs", verdict, "; ".join(fixes)))
    return out


def check_shadowed_libs(v: FactsView, k: Knowledge) -> list[Finding]:
    """LD_LIBRARY_PATH's copy of a CUDA library loaded instead of the one a library's own RUNPATH names."""
    out = []
    seen: set[str] = set()
    for owner, ver, f in list(_framework_files(v)) + list(_extension_files(v)):
        for so, hit in sorted(as_dict(f.get("resolved")).items()):
            hit = as_dict(hit)
            own, path = as_str(hit.get("own")), as_str(hit.get("path"))
            if not own or not path or hit.get("from") != "LD_LIBRARY_PATH" or path in seen:
                continue
            a, b = as_str(hit.get("version")), as_str(hit.get("own_version"))
            if a and b and vcmp(a, b) >= 0:
                continue  # the same library, or a newer one of its soname: what it was built against still holds
            seen.add(path)
            folder = path.rsplit("/", 1)[0]
            older = bool(a and b)  # (older: a newer one was skipped above; unknown: said, not judged)
            out.append((error if older else warn)(
                "ld-library-path",
                f"LD_LIBRARY_PATH entry {folder} puts {path}{f' ({a})' if a else ''} before {owner} {ver}'s own {own}"
                f"{f' ({b})' if b else ''}: its RUNPATH is searched after LD_LIBRARY_PATH, so {so} comes from the "
                f"wrong place — expect 'cuDNN version incompatibility' or 'undefined symbol'",
                drop_ld_path(v, folder) + f" (drop {folder}: {owner} brings its own {so})",
            ))
    return out


def loader_explains(v: FactsView) -> bool:
    """Whether the probe read what the loader resolves for torch's own libraries."""
    return any(as_dict(f.get("resolved")) for n, _v, f in _framework_files(v) if n == "torch")


CHECKS = (check_unreachable_libs, check_shadowed_libs)
