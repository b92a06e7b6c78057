"""envman.lock is a file users edit by hand (and commit): whatever value sits at whatever place in it, with its
lock_hash left as it was or recomputed, the commands that generate files from it (`ci github|gitlab|bake|check`,
`cluster slurm|k8s`) generate them or refuse with one `error:` and one `hint:` line and exit 1 — never exit 70.
Found when `stack.framework: [1]` or `python_lock: "x"` made `envman ci github` an internal error (AttributeError)
and `stack.targets: true` did the same to `envman cluster k8s`."""
from __future__ import annotations

import io
import json
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hostile import places
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envman.cli.main import main
from envman.lock.lockfile import lock_digest

PROJECTS = Path(__file__).resolve().parents[1] / "fixtures" / "ci" / "projects"
GIT_SPEC = "envman @ git+https://git.example.com/acme/envman@" + "5" * 40
PUSHED = {"ref": "reg.example.com/t/demo:x", "digest": "sha256:" + "a" * 64,
          "pinned": "reg.example.com/t/demo@sha256:" + "a" * 64}
SPECS = {"single": "name: demo\ntargets: [h100]\ncommand: [python, train.py]\n",
         "profiles": (PROJECTS / "profiles" / "envman.yaml").read_text() + "command: [python, train.py]\n"}
COMMANDS = [["ci", "github", "P", "--envman-spec", GIT_SPEC], ["ci", "gitlab", "P", "--envman-spec", GIT_SPEC],
            ["ci", "bake", "P"], ["ci", "check", "P"], ["cluster", "slurm", "P", "--images", "/shared/images"],
            ["cluster", "k8s", "P"]]
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
                    | st.sampled_from(["12.4", "sm_90", "9.0", "2.14.1", "h100", "cpu", "a\nb", "\x85"]),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                    max_leaves=6)



LOCKS = {(name, f.name): {**json.loads(f.read_text()), "pushed": PUSHED}
         for name in SPECS for f in sorted((PROJECTS / name).glob("envman*.lock"))}
PLACES = [(lock, place) for lock, doc in LOCKS.items() for place in places(doc)]


def test_the_locks_have_every_section():
    assert len(LOCKS) == 4 and {p[1][0] for p in PLACES} >= {"stack", "python_lock", "base_image", "pushed", "name"}


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=st.sampled_from(PLACES), value=JSON, rehash=st.booleans(), argv=st.sampled_from(COMMANDS))
def test_any_value_anywhere_in_the_lock_is_generated_from_or_refused(where, value, rehash, argv):
    (project, lock_file), place = where
    doc = json.loads(json.dumps(LOCKS[(project, lock_file)]))
    holder = doc
    for k in place[:-1]:
        holder = holder[k]
    holder[place[-1]] = value
    if rehash:  # as if its author recomputed the hash: the values are still checked
        doc["lock_hash"] = lock_digest(doc)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / project
        shutil.copytree(PROJECTS / project, root)
        (root / "envman.yaml").write_text(SPECS[project])
        (root / lock_file).write_text(json.dumps(doc))
        err, out = io.StringIO(), io.StringIO()
        with redirect_stderr(err), redirect_stdout(out):
            rc = main([str(root) if a == "P" else a for a in argv])
    lines = err.getvalue().splitlines()
    assert rc in (0, 1), (rc, lines)
    if rc:
        assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), lines
