"""Training code that runs make or g++ as it starts gets an image with them (issue 38, still open): our own few-line
fixtures of the pattern (a train.py building its ops library with make before the first step, as detection and
point-cloud repositories do), and near misses that stay quiet."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from envman.app.init import InitOptions, init_project
from envman.lock.toolchain import runtime_toolchain
from envman.project.compiled import compiled_code


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_script_that_runs_make_at_start_keeps_the_toolchain_in_the_image_and_says_why(tmp_path):
    root = _tree(tmp_path / "ops", {"requirements.txt": "numpy\n",
                                    "train.py": "import subprocess\nsubprocess.check_call(['make', '-C', 'ops'])\n",
                                    "ops/Makefile": "all:\n\tg++ -shared -fPIC -o libops.so ops.cpp\n"})
    out = init_project(root, InitOptions(no_lock=True, cpu=True, python="3.11"))
    note = "the code compiles when it runs (train.py:2 runs make): the image keeps build-essential (gcc, g++, make)"
    assert note in out.notes
    final = (root / "Dockerfile").read_text().split("\n# the image\n")[1]
    assert "apt-get install -y --no-install-recommends build-essential" in final


def test_each_way_of_running_a_compiler_is_found_and_near_misses_are_not(tmp_path):
    root = _tree(tmp_path / "p", {
        "ops/__init__.py": "import os\nos.system(f'g++ -O2 -shared {SRC} -o ops.so')\n",
        "cuda/build.py": "from subprocess import run\nrun('nvcc -c k.cu', shell=True)\n",
        "setup.py": "import subprocess\nsubprocess.call(['make'])\n",  # the build's, not the run's
        "tools.py": "import subprocess\nsubprocess.run(['git', 'describe'])\nprint('make sure')\nrun(['python', 'make.py'])\n",
    })
    assert runtime_toolchain(root) == (("build-essential",), [
        "the code compiles when it runs (cuda/build.py:2 runs nvcc, ops/__init__.py:2 runs g++): the image keeps "
        "build-essential (gcc, g++, make)"])
    (root / "ops" / "__init__.py").unlink()
    assert runtime_toolchain(root) == ((), [
        "the code compiles when it runs (cuda/build.py:2 runs nvcc): nvcc comes with a CUDA devel base: set "
        "cuda_devel: true in envman.yaml"])


_WORD = st.from_regex(r"[A-Za-z0-9_./=-]{1,12}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(tool=st.sampled_from(["make", "gcc", "g++", "cc", "c++", "/usr/bin/make"]), other=_WORD,
       args=st.lists(_WORD, max_size=4), form=st.sampled_from(["os.system({s!r})", "subprocess.run({l!r})",
                                                                "subprocess.Popen({l!r}, cwd='x')",
                                                                "subprocess.check_output({s!r}, shell=True)"]))
def test_a_compiler_as_the_commands_first_word_is_found_and_nothing_else_is(tmp_path_factory, tool, other, args, form):
    root = tmp_path_factory.mktemp("p")
    (root / "train.py").write_text("import os, subprocess\n\n" + form.format(s=" ".join([tool, *args]), l=[tool, *args])
                                   + "\n" + form.format(s=" ".join([other, *args]), l=[other, *args]) + "\n")
    apt, notes = runtime_toolchain(root)
    assert apt == ("build-essential",)
    want = [f"train.py:3 runs {tool.rsplit('/', 1)[-1]}"]
    if other.rsplit("/", 1)[-1] in ("make", "gcc", "g++", "cc", "c++", "nvcc"):
        want.append(f"train.py:4 runs {other.rsplit('/', 1)[-1]}")
    assert notes[0].startswith(f"the code compiles when it runs ({', '.join(want)}): ")


def test_envmans_own_kit_is_not_the_projects_code(tmp_path):
    # the kit .envman/kit.py (written by an earlier init) quotes torch.utils.cpp_extension.load in the doctor's
    # messages: read as the project's code, every re-init said the project compiles extensions when it runs
    root = _tree(tmp_path / "p", {"pyproject.toml": "[project]\nname = 'p'\nversion = '0'\n",
                                  "p/__init__.py": "",
                                  ".envman/kit.py": "'torch.utils.cpp_extension' ; load_inline(x)\n"})
    compiled = compiled_code(root)
    assert compiled is None or not compiled.at_runtime


def test_with_an_entry_point_only_the_code_it_reaches_counts(tmp_path):
    # an installer script beside the training code (seen in a JAX repository's scripts/install_*_deps.py running gcc)
    # is not what the image runs as it starts
    root = _tree(tmp_path / "p", {"train.py": "import ops.build\n", "ops/__init__.py": "",
                                  "ops/build.py": "import subprocess\ndef build():\n    subprocess.run(['make'])\n",
                                  "scripts/install_deps.py": "import os\nos.system('gcc -v')\n"})
    assert runtime_toolchain(root)[1] == ["the code compiles when it runs (ops/build.py:3 runs make): the image keeps "
                                          "build-essential (gcc, g++, make)"]
    assert runtime_toolchain(root, ["python", "scripts/install_deps.py"])[1] == [
        "the code compiles when it runs (scripts/install_deps.py:2 runs gcc): the image keeps build-essential (gcc, "
        "g++, make)"]
    (root / "ops" / "build.py").write_text("")
    assert runtime_toolchain(root) == ((), [])
