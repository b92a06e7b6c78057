"""init's Python when the repository leaves it open: the newest whose lock builds the fewest sdists."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from envman.app.generate import Outcome, Planned, commit, plan_stacks
from envman.app.lockinputs import LockOptions, ProjectInputs
from envman.app.stack import spec_request
from envman.errors import LockError, ResolutionError, ToolError, UsageError
from envman.matrix.load import load_matrix
from envman.project.spec import ProjectSpec
from envman.resolve.resolver import resolve_stack

TRIES = 2  # older Pythons tried at most (each is one more uv run)
# the lock's refusals for want of a wheel, and uv's "No solution found" (a pin with wheels for older Pythons only:
# "we only found wheels for `tensorflow-addons` (v0.21.0) with the following Python ABI tags: `cp38` … `cp311`")
_NO_WHEEL = ("has no wheel for the target platform", "no wheel for Linux", "No solution found")


def _culprit(err: LockError | ToolError) -> str:
    """The package a refusal names: ``numpy==1.23.5 (needed by torch) …``, or uv's ``wheels for `tensorflow-addons```."""
    import re

    m = re.search(r"wheels for `([^`]+)`", f"{err.message} {err.hint}")
    return m.group(1) if m else err.message.split(" ")[0] if "==" in err.message.split(" ")[0] else "a pin"


def source_built(planned: Planned) -> list[str]:
    """The packages the planned image builds from source (the builder stage's lock), by name."""
    out: list[str] = []
    for s in planned.stacks:
        for path, text in s.writes:
            if path.name == s.files.source:
                out += [ln.split("==")[0] for ln in text.splitlines() if "==" in ln and not ln.startswith((" ", "#"))]
    return sorted(set(out))


def older_pythons(python: str, spec: ProjectSpec) -> list[str]:
    """The next older minors than ``python`` the repository's own constraint (``spec.python``) admits."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    major, minor = (int(x) for x in python.split(".")[:2])
    try:
        allowed = SpecifierSet(spec.python) if spec.python and spec.python[0] in "<>=!~" else None
    except InvalidSpecifier:
        allowed = None
    out = [f"{major}.{m}" for m in range(minor - 1, minor - 1 - TRIES, -1) if m >= 8]
    return [p for p in out if allowed is None or allowed.contains(f"{p}.0", prereleases=True) or allowed.contains(p)]


def open_choice(spec: ProjectSpec, python_asked: str | None, no_lock: bool) -> bool:
    """The Python is envman's to choose: nobody asked for one, the files do not pin one minor, one stack."""
    return not (python_asked or no_lock or spec.profiles) and not (spec.python and spec.python[0].isdigit())


def plan_with_wheels(root: Path, spec: ProjectSpec, opts: LockOptions, make_extra, base_image: str | None,
                     force: bool, notes: list[str]) -> Outcome:
    """Plan the lock for ``spec``; when it builds packages from source (or is refused for want of a wheel), also for
    older Pythons, and commit the newest plan that builds the fewest. ``make_extra(spec)``: the files written with
    the lock (the envman.yaml init creates, with the Python it chose)."""
    matrix = load_matrix()

    def plan(s: ProjectSpec) -> Planned:
        inputs = ProjectInputs.read(root, s, matrix).with_base_image(base_image)
        return plan_stacks(inputs, opts, force=force, extra=make_extra(s))

    first: Planned | None = None
    error: LockError | ToolError | None = None
    try:
        first = plan(spec)
        built = source_built(first)
        if not built:
            return commit(first)
    except (LockError, ToolError) as err:
        if not any(w in f"{err.message} {err.hint}" for w in _NO_WHEEL):
            raise
        error, built = err, [_culprit(err)]
    python = first.stacks[0].resolution.python if first else resolve_stack(matrix, spec_request(matrix, spec)).python
    best = _best_older(plan, python, spec, built, refused=error is not None)
    if best is not None:
        candidate, older, left = best
        notes.append(_said(python, older, built, left, refused=error is not None))
        return commit(candidate)
    if first is not None:
        return commit(first)
    assert error is not None
    raise error


def _best_older(plan, python: str, spec: ProjectSpec, built: list[str], refused: bool):
    """(plan, Python, what it still builds) of the newest older Python whose lock builds fewest; None: none better."""
    best: tuple[Planned, str, list[str]] | None = None
    for older in older_pythons(python, spec):
        try:
            candidate = plan(replace(spec, python=older))
        except (LockError, ResolutionError, UsageError, ToolError):
            continue
        left = source_built(candidate)
        better = refused or len(left) < len(built)  # a refused lock is worse than any that builds
        if better and (best is None or len(left) < len(best[2])):
            best = (candidate, older, left)
        if not left:
            break
    return best


def _said(python: str, older: str, built: list[str], left: list[str], refused: bool) -> str:
    if refused:
        why = (f"uv finds no solution for Python {python}" if built == ["a pin"] else
               f"{built[0]} has no wheel for Python {python}") + ", so its lock is refused"
    else:
        why = (f"{', '.join(built[:4])} {'has' if len(built) == 1 else 'have'} no wheel for Python {python}, so its "
               f"lock would build {'it' if len(built) == 1 else 'them'} from source")
    return (f"Python {older}: {why}; for {older} "
            + (f"only {', '.join(left)} {'is' if len(left) == 1 else 'are'} built" if left else "every pin has a wheel")
            + f" (python: \"{older}\" in envman.yaml; --python {python} to keep {python})")
