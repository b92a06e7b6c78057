"""``envman matrix show|check`` as use cases (deriving the data is tools/matrix/'s work)."""

from __future__ import annotations

from pathlib import Path

from envman.errors import UsageError

SUBJECTS = ("torch", "tensorflow", "jax", "gpus", "cuda", "cudnn", "base-images")


def _matrix_for(subject: str, matrix):
    if subject not in SUBJECTS:
        import difflib

        close = difflib.get_close_matches(subject, SUBJECTS, n=1)
        raise UsageError(f"unknown matrix subject {subject!r}", hint=f"did you mean {close[0]}?" if close else "one of: " + ", ".join(SUBJECTS))
    if matrix is None:
        from envman.matrix.load import load_matrix

        matrix = load_matrix()
    return matrix


def _flag(prov) -> str:
    return "uncertain" if prov.uncertain else ""


def show_matrix(subject: str, matrix=None) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of one subject of ``matrix`` (default: the shipped one)."""
    m = _matrix_for(subject, matrix)
    if subject == "cuda":
        floors = {c.major: str(c.minor_compat_floor) for c in m.cuda_majors}
        return (
            ["cuda", "latest", "min_driver", "minor_compat_floor", "archs", "data"],
            [[c.label, c.latest_update, str(c.min_driver), floors.get(c.version.major, "?"),
              f"{min(c.archs).sm}…{max(c.archs).sm}" if c.archs else "", _flag(c.prov)] for c in m.cuda],
        )
    if subject == "gpus":
        return (
            ["id", "name", "cc", "memory_gib", "segment", "aliases"],
            [[g.id, g.name, str(g.cc), f"{g.memory_gib:g}" if g.memory_gib else "", g.segment, ", ".join(g.aliases)]
             for g in sorted(m.gpus, key=lambda g: (g.segment, g.cc, g.id))],
        )
    if subject in ("torch", "tensorflow", "jax"):
        rows = []
        for r in m.frameworks[subject]:
            for v in r.variants:
                rows.append([
                    str(r.version), v.name + (" *" if v.name == r.pypi_default else ""), str(v.cuda or "-"),
                    v.cudnn or "-", " ".join(a.sm for a in sorted(v.archs)) or "-",
                    " ".join(r.python), ", ".join(f"{k} {x}" for k, x in r.companions if x),
                    "uncertain" if (v.prov.uncertain or r.prov.uncertain) else "",
                ])
        return (["version", "variant (* = PyPI)", "cuda", "cudnn", "archs", "python", "companions", "data"], rows)
    if subject == "cudnn":
        return (
            ["cudnn", "cuda_majors", "min_cc", "data"],
            [[str(c.version), ",".join(map(str, c.cuda_majors)), ", ".join(f"cu{k}: {cc}" for k, cc in c.min_cc), _flag(c.prov)]
             for c in m.cudnn],
        )
    rows = [["(slim)", m.base_images.slim, "-", "-", _flag(m.base_images.slim_prov)]]
    for i in m.base_images.cuda:
        rows.append([str(i.cuda), i.runtime, i.devel, i.python, _flag(i.prov)])
    return (["cuda", "runtime", "devel", "python", "data"], rows)


def check_matrix(directory: Path | None = None) -> list[str]:
    """Every problem the loader finds, read fresh, and every models.yaml alias naming another model; [] when none."""
    from envman.errors import MatrixError
    from envman.matrix.load import _load_cached, load_matrix
    from envman.resources import matrix_dir

    _load_cached.cache_clear()
    d = Path(directory) if directory is not None else matrix_dir()
    try:
        load_matrix(d)
    except MatrixError as exc:
        return list(getattr(exc, "problems", None) or [str(exc)])
    models = d / "models.yaml"
    if not models.is_file():
        return []
    # envman fit's catalog: an alias must name a model with its entry's config
    from envman.fit.aliases import alias_problems
    from envman.inputs import read_data
    from envman.matrix.load import _yaml_load

    return alias_problems(_yaml_load(read_data(models).decode("utf-8")))


def show_matrix_data(subject: str, matrix=None) -> list[dict]:
    """One typed object per entry of ``subject``: ``envman matrix show --json`` (docs/matrix.md)."""
    m = _matrix_for(subject, matrix)

    def prov(p) -> dict:
        return {"source": p.source, "uncertain": p.uncertain, "note": p.note}

    def cc(x) -> str | None:
        return str(x) if x is not None else None

    if subject in ("torch", "tensorflow", "jax"):
        out = []
        for r in m.frameworks[subject]:
            for v in r.variants:
                out.append({
                    "framework": subject, "version": str(r.version), "variant": v.name,
                    "pypi_default": v.name == r.pypi_default,
                    "cuda": str(v.cuda) if v.cuda is not None else None, "cudnn": v.cudnn, "nccl": v.nccl,
                    "archs": [a.sm for a in sorted(v.archs)], "ptx": [a.sm for a in sorted(v.ptx)],
                    "python": list(r.python), "companions": {k: x for k, x in r.companions},
                    "numpy_abi": r.numpy_abi, "index_url": v.index_url, "extras": list(r.extras),
                    "uncertain": v.prov.uncertain or r.prov.uncertain,
                    "source": v.prov.source or r.prov.source, "note": v.prov.note or r.prov.note,
                    "release": prov(r.prov),
                })
        return out
    if subject == "gpus":
        return [{
            "id": g.id, "name": g.name, "cc": str(g.cc), "sm": g.cc.sm, "memory_gib": g.memory_gib,
            "segment": g.segment, "aliases": list(g.aliases), "family": g.family,
            "min_driver": str(g.min_driver) if g.min_driver is not None else None,
            "host_arch": g.host_arch, "listed": str(g.listed) if g.listed is not None else None,
            "pci": {d: str(v) for d, v in g.pci}, **prov(g.prov),
        } for g in sorted(m.gpus, key=lambda g: (g.segment, g.cc, g.id))]
    if subject == "cuda":
        floors = {c.major: str(c.minor_compat_floor) for c in m.cuda_majors}
        return [{
            "version": str(c.version), "latest_update": c.latest_update, "min_driver": str(c.min_driver),
            "minor_compat_floor": floors.get(c.version.major), "archs": [a.sm for a in sorted(c.archs)], **prov(c.prov),
        } for c in m.cuda]
    if subject == "cudnn":
        return [{
            "version": str(c.version), "cuda_majors": list(c.cuda_majors),
            "min_cc": {str(k): cc(v) for k, v in c.min_cc}, **prov(c.prov),
        } for c in m.cudnn]
    out = [{"kind": "slim", "image": m.base_images.slim, "cuda": None, "runtime": None, "devel": None,
            "python": None, "ubuntu": None, "cudnn": None, **prov(m.base_images.slim_prov)}]
    for i in m.base_images.cuda:
        out.append({"kind": "cuda", "image": None, "cuda": str(i.cuda), "update": i.update, "runtime": i.runtime,
                    "devel": i.devel, "python": i.python, "ubuntu": i.ubuntu, "cudnn": i.cudnn, **prov(i.prov)})
    return out
