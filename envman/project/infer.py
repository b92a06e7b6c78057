"""Which framework a repository needs, and in what range, from every requirement it states: direct
lines, extras, conda pins, setup.py, Poetry, and packages that pull a framework in transitively (the
table in matrices/framework_dependents.yaml). Ranges from every source are intersected; two sources that
cannot both hold are a refusal that names both.

PURE apart from reading the dependents table (``load_dependents``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from envman import frameworks
from envman.errors import MatrixError, UsageError
from envman.inputs import read_regular_text
from envman.project.age import say_age
from envman.project.req import LINUX, Req, holds
from envman.resources import matrix_dir

_LOCAL = re.compile(r"\+(cu\d+|cpu|rocm[\d.]+)\Z")


@dataclass(frozen=True)
class Dependent:
    package: str
    framework: str
    extra: str | None
    seen: str
    source: str


def load_dependents() -> tuple[Dependent, ...]:
    import yaml

    path = matrix_dir() / "framework_dependents.yaml"
    try:
        doc = yaml.safe_load(read_regular_text(path)) or {}  # bounded; a FIFO in its place never blocks
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MatrixError([f"{path.name}: {exc}"]) from None
    out = []
    for i, row in enumerate(doc.get("dependents") or []):
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("package", "framework", "source")):
            raise UsageError(f"framework_dependents.yaml: dependents[{i}]: needs package, framework and source",
                             hint="each row names the package, the framework it pulls and where that was read")
        out.append(Dependent(row["package"], row["framework"], row.get("extra"), str(row.get("seen", "")), row["source"]))
    return tuple(out)


@dataclass
class Inference:
    framework: str | None = None  # "torch>=2.3,<2.6" or "torch+cu118" (the local label is a variant constraint)
    name: str | None = None
    cpu: bool = False
    variant: str | None = None
    cuda: str | None = None  # "11.8" when a range comes with a CUDA pin (conda pytorch-cuda=11.8)
    companions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    beside: list[Req] = field(default_factory=list)  # another framework's lines, kept on the CPU beside this one
    others: list[Req] = field(default_factory=list)  # another framework's lines, packages beside the chosen one


def _cpu_beside(reqs: list[Req], dependents: tuple[Dependent, ...], inf: Inference) -> list[Req]:
    """A repository that names a framework which keeps another on the CPU in its image (JAX on the GPU, TensorFlow
    for its tf.data input pipelines) infers the first: the other's lines are said once and left out of the
    inference. Returns the requirements the inference reads."""
    dists = frameworks.by_distribution()
    plain = {d.package: d.framework for d in dependents if d.extra is None}
    named = {dists.get(r.name) or plain.get(r.name) for r in reqs} - {None}
    for host in sorted(n for n in named if n in {f.name for f in frameworks.registered()}):
        beside = dict(frameworks.get(host).cpu_beside)
        guests = [r for r in reqs if r.name in beside]
        if not guests or named - {host} - {dists[r.name] for r in guests}:
            continue
        inf.beside = guests
        shown = ", ".join(f"{r.origin}: {r.req}" for r in guests)
        cpu = sorted({beside[r.name] for r in guests})
        inf.notes.append(f"{shown}: beside {host}, one image: {host} on the GPU, {dists[guests[0].name]} on the CPU "
                         f"(installed as {', '.join(cpu)}, for input pipelines)")
        return [r for r in reqs if r not in guests]
    return reqs


def _cuda_from_extras(fw: str, r: Req, inf: Inference, seen: list[tuple[str, str]]) -> None:
    """``jax[cuda12]`` names its CUDA major; ``jax[tpu]`` is refused."""
    f = frameworks.get(fw)
    err = f.refusal(r.req, r.origin)
    if err is not None:
        raise err
    majors = dict(f.cuda_extras)
    for e in sorted(r.req.extras):
        major = majors.get(canonicalize_name(e))
        if major is not None:
            seen.append((f"{r.origin}: {r.req}", major))
        elif majors and canonicalize_name(e).startswith("cuda"):  # jax[cuda11_cudnn86]: Google's storage, not PyPI
            inf.notes.append(f"{r.origin}: {r.req}: '{e}' is not one of {fw}'s CUDA builds on PyPI "
                             f"({', '.join(sorted({x for x in majors if '-' not in x}))}): the stack installs the one "
                             "envman resolves")
    if len({m for _, m in seen}) > 1:
        (a, ma), (b, mb) = seen[0], next(x for x in seen if x[1] != seen[0][1])
        raise UsageError(f"{a} asks for CUDA {ma} and {b} for CUDA {mb}", hint="keep one CUDA extra")
    if seen and inf.cuda is None:
        inf.cuda = seen[0][1]
        inf.notes.append(f"{seen[0][0]}: the CUDA {seen[0][1]} build (cuda: '{seen[0][1]}')")


def spec_floor(spec: SpecifierSet) -> str:
    """The X.Y a CUDA-numbered wheel's line starts at (``>=12.9.79`` -> "12.9"); "" when it sets none."""
    lows = [Version(s.version.removesuffix(".*")).release[:2] for s in spec
            if s.operator in (">=", ">", "==", "~=") and "+" not in s.version]
    return ".".join(map(str, max(lows))) if lows else ""


def _cuda_floors(reqs: list[Req], inf: Inference) -> None:
    """The project's own lines on CUDA-numbered wheels bound the CUDA the stack installs them at, where it was none
    or their major: ``nvidia-cuda-runtime-cu12>=12.9`` -> ``>=12.9,<13``, ``==12.1.105`` -> ``==12.1.*``."""
    lows = [(r, m[1], spec_floor(r.req.specifier)) for r in reqs if (m := re.fullmatch(r"nvidia-cuda-[a-z]+-cu(\d+)", r.name))]
    lows = [x for x in lows if x[2].startswith(f"{x[1]}.") and inf.cuda in (None, x[1])]
    if lows:
        r, major, low = max(lows, key=lambda x: Version(x[2]))
        exact = any(s.operator == "==" for s in r.req.specifier)  # a lock's export: that CUDA
        inf.cuda = f"=={low}.*" if exact else f">={low},<{int(major) + 1}"
        inf.notes.append(f"{r.origin}: {r.req}: CUDA {low}{'' if exact else ' or newer'} (cuda: '{inf.cuda}')")


def _split_local(req: Req) -> tuple[SpecifierSet, str | None]:
    """The line's specifier without local labels (``==2.1.0+cu118`` → ``==2.1.0``), and the last label's variant."""
    variants = [m.group(1) for s in req.req.specifier if (m := _LOCAL.search(s.version))]
    parts = [f"{s.operator}{_LOCAL.sub('', s.version)}" for s in req.req.specifier]
    return SpecifierSet(",".join(parts)), variants[-1] if variants else None


def on_linux(r: Req) -> bool:
    """The line's environment marker holds on Linux x86_64 for some Python envman builds for (a
    ``sys_platform == 'darwin'`` line does not: it is not the image's)."""
    return any(holds(r.req.marker, {**LINUX, "python_version": f"3.{m}", "python_full_version": f"3.{m}.0"})
               for m in range(9, 15))


NOT_APPLIED = "the image's: not applied"


def _for_python(r: Req, python: str | None, inf: Inference) -> bool:
    """A framework line behind a python_version marker counts only under the image's Python:
    ``torch==2.6.0; python_version < "3.14"`` beside ``torch>=2.9.0; python_version >= "3.14"`` is one pin per
    Python, not a contradiction (seen in a repository issue 38 tried). Other lines are kept as they were."""
    if python is None or r.req.marker is None or "python" not in str(r.req.marker) \
            or r.name not in frameworks.by_distribution():
        return True
    if holds(r.req.marker, {**LINUX, "python_version": python, "python_full_version": f"{python}.0"}):
        return True
    inf.notes.append(f"{r.origin}: {r.req} is not for Python {python}, {NOT_APPLIED}")
    return False


def _cuda_chosen(variants: list[tuple[str, str]], inf: Inference) -> list[tuple[str, str]]:
    """--cuda chose the CUDA: the repository's CUDA pins are said, not applied."""
    if variants:
        inf.notes.append("--cuda chose the CUDA: the repository's CUDA pins (" + ", ".join(
            f"{o}: {v}" for o, v in variants) + ") are not applied")
    return []


def _say_pulled(name: str, transitive: list, inf: Inference) -> None:
    """A package that pulls another framework than the one the repository names directly."""
    pulled = sorted({d.framework for _, d in transitive if d.framework != name})
    if pulled:
        r, d = next(t for t in transitive if t[1].framework == pulled[0])
        inf.notes.append(f"{r.origin}: {r.req} pulls {d.framework}, but the repository names {name} directly: the "
                         f"stack is {name}'s (pass --framework {d.framework} for the other)")


def _cpu_only(r: Req) -> bool:
    return r.name == "tensorflow-cpu" or _split_local(r)[1] == "cpu" or "cpu" in r.req.extras  # jax[cpu]


def _gpu_marked(r: Req, fw: str) -> bool:
    """A CUDA build named on the line: a ``+cu128`` local version, ``tensorflow[and-cuda]``, or one of the
    framework's CUDA extras (``jax[cuda12]``)."""
    variant = _split_local(r)[1]
    cuda = {e for e, _ in frameworks.get(fw).cuda_extras}
    return (bool(variant and variant.startswith("cu")) or "and-cuda" in r.req.extras
            or any(canonicalize_name(e) in cuda for e in r.req.extras))


def _one_framework(reqs: list[Req], asked: str | None, inf: Inference, code: str | None = None) -> list[Req]:
    """The requirements without the lines of a framework that is not the one: the one ``--framework`` asked
    for, or, when the repository names two, the one it gives the GPU (the other is a CPU build, like
    ``tensorflow-cpu`` beside ``torch==2.7.0+cu128``, or the only one with a CUDA mark). The other's lines
    stay packages, installed from PyPI as written, and are said. ``code``: the framework the project's code
    imports (project/codeimports.py), which decides when the lines cannot."""
    dists = frameworks.by_distribution()
    named = sorted({dists[r.name] for r in reqs if r.name in dists})
    if asked is None and len(named) > 1:
        lines = {n: [r for r in reqs if dists.get(r.name) == n] for n in named}
        gpu = [n for n in named if any(_gpu_marked(r, n) for r in lines[n])]
        not_cpu = [n for n in named if not all(_cpu_only(r) for r in lines[n])]
        pick = gpu if len(gpu) == 1 else not_cpu if len(not_cpu) == 1 else [code] if code in named else []
        if not pick:
            a, b = (lines[n][0] for n in named[:2])
            raise UsageError(f"{a.origin}: {a.req} and {b.origin}: {b.req}: the repository names two frameworks",
                             hint=f"pass --framework {named[0]} or --framework {named[1]} to choose the one the "
                                  "image's CUDA stack is for (the other is installed from PyPI as written)")
        asked = pick[0]
        why = "a CUDA build" if len(gpu) == 1 else "not a CPU-only build" if len(not_cpu) == 1 else \
            "the framework the code imports"
    else:
        why = "--framework"
    if asked is None or len(named) < 2 and asked in named:
        return reqs
    out = []
    for r in reqs:
        other = dists.get(r.name) not in (None, asked) or (r.name in frameworks.companions()
                                                            and r.name not in _companions_of(asked))
        if other:
            inf.others.append(r)
            inf.notes.append(f"{r.origin}: {r.req}: the stack is {asked}'s ({why}); this line is installed from "
                             "PyPI as written, without envman's CUDA pins")
        else:
            out.append(r)
    return out


def infer_framework(reqs: list[Req], variants: list[tuple[str, str]], releases: dict[str, list],
                    dependents: tuple[Dependent, ...], asked: str | None = None,
                    keep_variants: bool = True, python: str | None = None, code: str | None = None) -> Inference:
    """``releases``: framework → its FrameworkRelease list (versions and companion versions) from the matrix.
    ``asked``: the framework ``--framework`` names (its lines decide; another framework's are packages);
    ``keep_variants``: False when ``--cuda`` chose the CUDA (the repository's CUDA pins are then said, not applied)."""
    inf = Inference()
    # another framework kept on the CPU beside this one (tensorflow beside jax) first, then a choice between two
    reqs = _one_framework(_cpu_beside([r for r in reqs if on_linux(r) and _for_python(r, python, inf)], dependents,
                                      inf), asked, inf, code)
    variants = variants if keep_variants else _cuda_chosen(variants, inf)
    direct: dict[str, list[tuple[Req, SpecifierSet]]] = {}
    extras: list[tuple[str, str]] = []
    for r in reqs:
        fw = frameworks.by_distribution().get(r.name)
        if fw is None:
            continue
        _cuda_from_extras(fw, r, inf, extras)
        spec, variant = _split_local(r)
        direct.setdefault(fw, []).append((r, spec))
        if r.name == "tensorflow-cpu" or variant == "cpu":
            inf.cpu = True
            inf.notes.append(f"{r.origin}: {r.req} means a CPU stack")
        elif variant and keep_variants:
            variants = variants + [(r.origin, variant)]
    _cuda_floors(reqs if keep_variants else [], inf)  # --cuda chose: the floors are the lock's to check
    by_pkg = {d.package: d for d in dependents}
    transitive = [(r, d) for r in reqs if (d := by_pkg.get(r.name)) and (d.extra is None or d.extra in r.req.extras)]
    if direct:
        name = next(iter(direct))
        if asked is None:
            _say_pulled(name, transitive, inf)
    elif transitive:
        names = sorted({d.framework for _, d in transitive})
        if len(names) > 1:
            (ra, da), (rb, db) = (next(t for t in transitive if t[1].framework == n) for n in names)
            raise UsageError(f"{ra.origin}: {ra.req} pulls {da.framework} and {rb.origin}: {rb.req} pulls {db.framework}",
                             hint="pass --framework to choose one")
        name = names[0]
        r, d = transitive[0]
        inf.notes.append(f"framework {name} inferred from {r.origin}: {r.req} (it requires {name}: {d.seen}; {d.source})")
    else:
        return inf
    inf.name = name
    rels = releases.get(name, [])
    allowed = [rel.version for rel in rels]
    # (origin, line, spec over framework versions)
    constraints = [(r.origin, str(r.req), spec) for r, spec in direct.get(name, []) if len(spec)]
    # a companion pin steers the framework: torchvision==0.20.1 exists only beside torch 2.5.1
    for r in reqs:
        if r.name in _companions_of(name):
            if r.name not in inf.companions and not r.origin.endswith(")"):
                inf.companions.append(r.name)
            spec, _ = _split_local(r)
            ok = [rel.version for rel in rels if dict(rel.companions).get(r.name)
                  and spec.contains(dict(rel.companions)[r.name], prereleases=True)]
            if not ok:
                known = sorted((rel.version, dict(rel.companions).get(r.name)) for rel in rels if dict(rel.companions).get(r.name))
                span = f" (envman knows {r.name} {known[0][1]}…{known[-1][1]}, beside {name} {known[0][0]}…{known[-1][0]})" if known else ""
                near = _nearest_beside(r, known)
                raise UsageError(f"{r.origin}: {r.req} has no release beside any {name} in envman's matrix{span}",
                                 hint=(f"pass --framework '{name}=={near[0]}' to take the nearest release envman knows "
                                       f"({r.name} {near[1]} beside it; the line then yields), or relax the pin")
                                 if near else f"relax {r.name}'s pin, or drop it and let envman choose the matching one")
            if len(ok) == len(rels):
                continue
            constraints.append((r.origin, str(r.req), _exact_set(ok, [rel.version for rel in rels])))
            if len(r.req.specifier):
                inf.notes.append(f"{r.origin}: {r.req} exists beside {name} " + ", ".join(str(v) for v in sorted(ok)))
            else:
                inf.notes.append(f"{r.origin}: {r.name} is released beside {name} {min(ok)}…{max(ok)} only; the range is narrowed to those")
    for i, (oa, la, sa) in enumerate(constraints):
        for ob, lb, sb in constraints[i + 1:]:
            both = [v for v in allowed if (sa & sb).contains(v, prereleases=True)]
            if allowed and not both and any(sa.contains(v, prereleases=True) for v in allowed) \
                    and any(sb.contains(v, prereleases=True) for v in allowed):
                raise UsageError(f"{oa}: {la} contradicts {ob}: {lb}",
                                 hint="no release satisfies both lines: relax one of them")
    total = SpecifierSet()
    for _, _, s in constraints:
        total &= s
    if allowed and constraints and not any(total.contains(v, prereleases=True) for v in allowed):
        lines = "; ".join(f"{o}: {ln}" for o, ln, _ in constraints)
        series = _nearest(total, allowed)
        raise UsageError(f"no {name} release in envman's matrix satisfies {lines}",
                         hint=f"pass --framework '{name}=={series.major}.{series.minor}.*' to take the nearest series envman "
                              f"knows (its releases: {min(allowed)}…{max(allowed)}), or relax the pins")
    vs = sorted({v for _, v in variants if v != "cpu"})
    if any(v == "cpu" for _, v in variants):
        inf.cpu = True
    if len(vs) > 1:
        a, b = (next(o for o, v in variants if v == x) for x in vs[:2])
        raise UsageError(f"{a}: CUDA variant {vs[0]} contradicts {b}: CUDA variant {vs[1]}",
                         hint=f"pass --cuda {_cuda_of(vs[0])} or --cuda {_cuda_of(vs[1])} to choose, or keep one CUDA pin")
    inf.variant = vs[0] if vs else None
    text = _spec_text(total, allowed)
    say_age(name, reqs, total, allowed, inf.notes)
    inf.framework = f"{name}{text}"
    if inf.variant:
        asked = next(o for o, v in variants if v == inf.variant)
        if text.startswith("==") and "*" not in text and "," not in text \
                and any(v.name == inf.variant for rel in rels for v in rel.variants):
            inf.framework += f"+{inf.variant}"  # the local label pins the variant itself (not torch's cu121 on jax)
        elif inf.variant.startswith("cu"):
            inf.cuda = _cuda_of(inf.variant)
        inf.notes.append(f"CUDA variant {inf.variant} from {asked}")
    return inf


def _nearest(spec: SpecifierSet, allowed: list[Version]) -> Version:
    """The known release nearest to what ``spec`` asks (the oldest when it asks for older ones)."""
    floor = [Version(s.version.rstrip(".*")) for s in spec if s.operator in ("==", ">=", "~=", "===")
             and s.version.rstrip(".*")[:1].isdigit()]
    want = max(floor) if floor else Version(str(max(allowed)))
    return min(allowed, key=lambda v: (abs(Version(str(v)).major * 100 + Version(str(v)).minor - want.major * 100
                                           - want.minor), -Version(str(v)).micro))


def _nearest_beside(r: Req, known: list) -> tuple | None:
    """(framework, companion) whose companion release is nearest to the line's pin."""
    pins = [Version(s.version.rstrip(".*")) for s in r.req.specifier if s.operator in ("==", ">=", "~=")
            and s.version.rstrip(".*")[:1].isdigit()]
    if not pins or not known:
        return None
    want = max(pins)

    def distance(tc: tuple) -> tuple:
        c, t = Version(str(tc[1])), Version(str(tc[0]))
        return abs(c.major * 100 + c.minor - want.major * 100 - want.minor), abs(c.micro - want.micro), -t.micro

    return min(known, key=distance)


def _cuda_of(variant: str) -> str:
    """``cu128`` → ``12.8``."""
    digits = variant[2:]
    return f"{digits[:-1]}.{digits[-1]}" if variant.startswith("cu") and len(digits) > 1 else variant


def _companions_of(name: str) -> tuple[str, ...]:
    return next((f.companions for f in frameworks.registered() if f.name == name), ())


def _exact_set(versions: list[Version], every: list[Version]) -> SpecifierSet:
    """The releases in ``versions`` as one specifier: a range, minus the releases inside it that are not in it."""
    if len(versions) == 1:
        return SpecifierSet(f"=={versions[0]}")
    lo, hi = min(versions), max(versions)
    holes = sorted(v for v in every if lo < v < hi and v not in versions)
    return SpecifierSet(",".join([f">={lo}", f"<={hi}"] + [f"!={v}" for v in holes]))


def _spec_text(spec: SpecifierSet, allowed: list[Version]) -> str:
    """The intersected range, as short as it stays true: one release left → ``==`` it."""
    if not len(spec):
        return ""
    ok = [v for v in allowed if spec.contains(v, prereleases=True)]
    if len(ok) == 1 and len(spec) > 1:
        return f"=={ok[0]}"
    return ",".join(sorted({str(s).replace(" ", "") for s in spec}))
