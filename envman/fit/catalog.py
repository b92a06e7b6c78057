"""IO for ``envman fit``: matrices/models.yaml, matrices/gpu_perf.yaml and a user's config.json → pure types.

Shipped data that is wrong is envman's bug: every problem is collected and raised at once as
``file: dotted.path: problem`` (MatrixError, exit 7). A user's config.json that cannot be used is a
UsageError naming the file and the key.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from envman.errors import MatrixError, UsageError
from envman.fit.aliases import match_key
from envman.fit.architectures import Arch, ArchError, arch_from_config
from envman.model import Cc

TASKS = ("causal-lm", "masked-lm", "image-classification", "clip", "speech-seq2seq", "diffusion")
PRECISION_KEYS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")


@dataclass(frozen=True)
class ModelEntry:
    id: str
    name: str
    aliases: tuple[str, ...]
    arch: Arch
    source: str


MEMORY_ONLY = "matrices/gpus.yaml memory_gib (no gpu_perf.yaml entry: no throughput figures)"


@dataclass(frozen=True)
class GpuSpec:
    """One GPU as the estimator sees it: memory, peak dense TFLOP/s, and what its architecture supports."""

    id: str
    name: str
    cc: Cc | None
    memory_bytes: int
    tflops: tuple[tuple[str, float], ...]
    source: str
    bandwidth: float = 0.0  # bytes/s
    uncertain: bool = False
    driver_total: int = 0  # bytes nvidia-smi / NVML show as the board's total (gpu_perf.yaml driver_total_mib); 0: unknown

    @property
    def card_bytes(self) -> int:
        """What a process can be given at most: the driver's total where a printout gives it, else the datasheet's."""
        return self.driver_total or self.memory_bytes

    @property
    def bf16(self) -> bool:
        return self.cc is not None and self.cc >= Cc(8, 0)

    def peak_tflops(self, precision: str) -> float | None:
        return dict(self.tflops).get(precision)


def _data_dir() -> Path:
    from envman.resources import matrix_dir

    return matrix_dir()


def _yaml(path: Path) -> Any:
    """A data file's parsed YAML, kept on disk under the digest of its bytes (envman/diskcache.py): the
    document is plain data, so a cached copy never holds an old envman's classes, and a hit skips importing
    PyYAML (~20 ms of a fit run)."""
    import hashlib

    from envman.diskcache import cached
    from envman.inputs import read_regular

    try:
        raw = read_regular(path)  # bounded; a FIFO in its place never blocks
    except OSError as exc:
        raise MatrixError([f"{path.name}: {exc}"]) from None

    def parse() -> Any:
        import yaml

        try:
            return yaml.load(raw.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise MatrixError([f"{path.name}: {exc}"]) from None

    return cached(f"fitdata-{path.stem}", hashlib.sha256(raw).hexdigest(), parse, _mapping)


def _mapping(v: Any) -> dict:
    """The parsed data file as the cache holds it (JSON data); anything but a mapping is a bad entry (a miss).
    The catalog's readers validate every entry they take from it, as they do fresh data."""
    if not isinstance(v, dict):
        raise ValueError("not a mapping")
    return v


@lru_cache(maxsize=2)
def load_models(directory: str | None = None) -> tuple[ModelEntry, ...]:
    path = Path(directory or _data_dir()) / "models.yaml"
    doc = _yaml(path)
    problems: list[str] = []
    out: list[ModelEntry] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), list):
        raise MatrixError([f"{path.name}: models: expected a list"])
    seen: set[str] = set()
    for i, e in enumerate(doc["models"]):
        at = f"{path.name}: models[{i}]"
        if not isinstance(e, dict):
            problems.append(f"{at}: expected a mapping")
            continue
        for key in ("id", "name", "task", "source"):
            if not isinstance(e.get(key), str) or not e.get(key):
                problems.append(f"{at}.{key}: missing or not a string")
        if e.get("task") not in TASKS:
            problems.append(f"{at}.task: {e.get('task')!r} is not one of {', '.join(TASKS)}")
        if not isinstance(e.get("params"), int) or e["params"] <= 0:
            problems.append(f"{at}.params: expected the published parameter count (a positive integer)")
        if e.get("id") in seen:
            problems.append(f"{at}.id: duplicate id {e.get('id')!r}")
        seen.add(str(e.get("id")))
        try:
            arch = _entry_arch(e)
        except ArchError as exc:
            problems += [f"{at}.config.{p}" for p in exc.problems]
            continue
        if problems:
            continue
        out.append(ModelEntry(e["id"], e["name"], tuple(e.get("aliases") or ()), arch, e["source"]))
    if problems:
        raise MatrixError(problems)
    return tuple(out)


def _entry_arch(e: dict) -> Arch:
    """A catalog entry's shape; a diffusion pipeline lists its frozen parts (text encoders, VAE) under frozen:."""
    frozen = e.get("frozen")
    if not frozen:
        return arch_from_config(e.get("config") or {})
    from envman.fit import diffusion

    parts = tuple(diffusion.frozen_part(f.get("config") or {}) for f in frozen)
    return diffusion.denoiser(e.get("config") or {}, parts)


def load_pipeline(folder: Path) -> Arch:
    """A diffusers pipeline folder, read offline: model_index.json names the components, each has a config.json
    (the denoiser's folder, and the frozen parts it trains beside)."""
    from envman.fit import diffusion
    from envman.inputs import present

    def read(sub: str) -> dict | None:
        f = folder / sub / "config.json"
        return _json_file(f, "a diffusers pipeline folder, as downloaded") if present(f) else None

    den = next(((n, c) for n in ("unet", "transformer", "controlnet") if (c := read(n)) is not None), None)
    if den is None:
        raise UsageError(f"{folder}: model_index.json but no unet/, transformer/ or controlnet/ config.json",
                         hint="give the pipeline folder as downloaded (it holds unet/config.json)")
    try:
        parts = tuple(diffusion.frozen_part(c) for n in ("text_encoder", "text_encoder_2", "text_encoder_3", "vae")
                      if (c := read(n)) is not None)
        return diffusion.denoiser(den[1], parts)
    except ArchError as exc:
        raise UsageError(f"{folder / den[0] / 'config.json'}: {exc.problems[0]}",
                         hint="envman models UNet2DConditionModel, ControlNetModel and FluxTransformer2DModel") from None


def find_model(name: str) -> ModelEntry:
    models = load_models()
    idx: dict[str, ModelEntry] = {}
    for m in models:
        for n in (m.id, m.name, *m.aliases):
            idx.setdefault(match_key(n), m)
    hit = idx.get(match_key(name))
    if hit:
        return hit
    close = difflib.get_close_matches(match_key(name), list(idx), n=4, cutoff=0.5)
    ids = list(dict.fromkeys(idx[c].id for c in close))
    hint = (f"did you mean: {', '.join(ids)}? " if ids else "") + \
        "`--model` takes a name from matrices/models.yaml, a config.json path, or use --params N"
    raise UsageError(f"unknown model {name!r}", hint=hint)


def _json_file(path: Path, hint: str) -> dict:
    """A config.json the user named: bounded, a FIFO or a link loop named, bad JSON one error."""
    from envman.inputs import MAX_SPEC, load_json, read_input

    doc = load_json(read_input(path, str(path), MAX_SPEC, hint=hint), str(path), hint=hint)
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: not a JSON object", hint=hint)
    return doc


def load_config(path: Path) -> Arch:
    """A Hugging Face config.json, read offline."""
    cfg = _json_file(path, "`--model` takes a Hugging Face config.json")
    try:
        return arch_from_config(cfg)
    except ArchError as exc:
        raise UsageError(f"{path}: {exc.problems[0]}" + (f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""),
                         hint="every problem: " + "; ".join(f"{path.name}: {p}" for p in exc.problems)) from None


_UNITS = {"TB/s": 1e12, "GB/s": 1e9}


def parse_bandwidth(text: object) -> float | None:
    """A datasheet's "3.35TB/s" / "2,039GB/s" in bytes per second (decimal units, as NVIDIA prints them)."""
    if not isinstance(text, str):
        return None
    t = text.replace(",", "").replace(" ", "")
    for unit, mult in _UNITS.items():
        if t.endswith(unit):
            try:
                v = float(t[: -len(unit)])
            except ValueError:
                return None
            return v * mult if v > 0 else None
    return None


def _dense(e: dict, at: str, problems: list[str]) -> dict[str, float]:
    """Dense TFLOP/s per precision, derived from the figures as printed (sparse ones halved)."""
    printed = e.get("printed")
    if not isinstance(printed, dict) or not printed:
        problems.append(f"{at}.printed: expected the datasheet's TFLOP/s per precision")
        return {}
    sparse = e.get("sparse") or []
    if not isinstance(sparse, list) or any(k not in printed for k in sparse):
        problems.append(f"{at}.sparse: expected a list of precisions printed 'with sparsity', got {sparse!r}")
        sparse = []
    out: dict[str, float] = {}
    for k, v in {**printed, **(e.get("derived") or {})}.items():
        if k not in PRECISION_KEYS:
            sug = difflib.get_close_matches(str(k), PRECISION_KEYS, n=1)
            problems.append(f"{at}.printed.{k}: unknown precision" + (f" (did you mean {sug[0]}?)" if sug else ""))
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            problems.append(f"{at}.printed.{k}: expected a positive number, got {v!r}")
        else:
            out[k] = float(v) / (2 if k in sparse and k in printed and k not in (e.get("derived") or {}) else 1)
    return out


@lru_cache(maxsize=2)
def _perf_doc(directory: str) -> Any:
    """gpu_perf.yaml's document, read once per process and folder (its readers below validate what they take);
    keyed by the folder itself: ENVMAN_MATRIX_DIR may name another one."""
    return _yaml(Path(directory) / "gpu_perf.yaml")


_Perf = tuple[int, tuple[tuple[str, float], ...], str, float, bool, int]


@lru_cache(maxsize=2)
def _load_perf() -> tuple[dict[str, _Perf], dict]:
    path = Path(_data_dir()) / "gpu_perf.yaml"
    doc = _perf_doc(str(path.parent))
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), dict):
        raise MatrixError([f"{path.name}: gpus: expected a mapping of gpus.yaml id → entry"])
    problems: list[str] = []
    out: dict[str, _Perf] = {}
    for gid, e in doc["gpus"].items():
        at = f"{path.name}: gpus.{gid}"
        if not isinstance(e, dict):
            problems.append(f"{at}: expected a mapping")
            continue
        mem = e.get("memory_bytes")
        if not isinstance(mem, int) or isinstance(mem, bool) or mem <= 0:
            problems.append(f"{at}.memory_bytes: expected a positive integer, got {mem!r}")
        tf = _dense(e, at, problems)
        bw = parse_bandwidth(e.get("bandwidth"))
        if bw is None:
            problems.append(f"{at}.bandwidth: expected the datasheet's memory bandwidth ('3.35TB/s'), got {e.get('bandwidth')!r}")
        if not isinstance(e.get("source"), str) or not e.get("source"):
            problems.append(f"{at}.source: missing")
        total = e.get("driver_total_mib")  # what nvidia-smi shows as the board's total, where a printout gives it
        if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total <= 0
                                  or not e.get("driver_total_source")):
            problems.append(f"{at}.driver_total_mib: expected a positive integer with driver_total_source, got {total!r}")
        if not problems:
            out[str(gid)] = (int(cast(int, mem)), tuple(sorted(tf.items())), str(e["source"]), float(cast(float, bw)),
                             bool(e.get("uncertain")), int(total or 0) * 2**20)
    util: dict = doc["utilisation"] if isinstance(doc.get("utilisation"), dict) else {}
    if problems:
        raise MatrixError(problems)
    return out, util


def utilisation(cc: Cc | None, precision_key: str) -> tuple[float, str, bool]:
    """(fraction of the dense peak, its source, uncertain?) for a GPU generation and precision."""
    util = _load_perf()[1]
    if precision_key == "fp32":
        f = util.get("fp32") or {}
        return float(f.get("value", 0.6)), str(f.get("source", "")), True
    for g in util.get("generations") or []:
        lo = Cc.parse(str(g["cc_min"]))
        if cc is not None and cc >= lo:
            return float(g["bf16"]), str(g["source"]), bool(g.get("uncertain"))
    return 0.3, "no generation matched: Volta's figure", True


def perf_constants() -> dict:
    return _load_perf()[1]


def gpu_specs(names: list[str] | tuple[str, ...]) -> tuple[GpuSpec, ...]:
    """Resolve what the user typed (h100, rtx-4090, an alias) through gpus.yaml, then attach gpu_perf.yaml."""
    from envman.matrix.load import load_matrix
    from envman.resolve.targets import parse_targets

    matrix = load_matrix()
    perf = _load_perf()[0]
    out: list[GpuSpec] = []
    for t in parse_targets(matrix, list(names)):
        if t.gpu is None:
            raise UsageError(f"target {t.label} is a compute capability, not a GPU: fit needs its memory and speed",
                             hint="name the GPU: --target h100, --target rtx-4090 …")
        g = t.gpu
        if g.id in perf:
            out.append(GpuSpec(g.id, g.name, g.cc, *perf[g.id]))
        elif g.memory_gib:  # no datasheet figures read yet: the memory verdict from gpus.yaml, no throughput
            out.append(GpuSpec(g.id, g.name, g.cc, int(g.memory_gib * 2**30), (), MEMORY_ONLY,
                               uncertain=g.prov.uncertain))
        else:
            raise UsageError(f"no memory data for {g.name} ({g.id}) in gpus.yaml or gpu_perf.yaml",
                             hint=f"GPUs with data: {', '.join(sorted(perf))}")
    return tuple(out)


def raw_config(ref: str) -> tuple[dict, str]:
    """The config values (HF keys) and task of a catalog entry or a config.json, for --trace."""
    p = Path(ref)
    if ref.endswith(".json") or p.exists():
        cfg = _json_file(p / "config.json" if p.is_dir() else p, "`--model` takes a Hugging Face config.json")
        return cfg, arch_from_config(cfg).task
    # ``ref`` is an id find_model returned: its entry is there
    e = next(e for e in _yaml(Path(_data_dir()) / "models.yaml")["models"] if e.get("id") == ref)
    return dict(e["config"]), e["task"]


_RULES = ("min_block", "small_size", "small_segment", "large_segment", "min_large_alloc", "round_large", "context_bytes")


@lru_cache(maxsize=2)
def allocator_rules():
    """The caching allocator's block and segment sizes and the CUDA context (gpu_perf.yaml ``allocator:``)."""
    from envman.fit.reserve import AllocatorRules

    path = Path(_data_dir()) / "gpu_perf.yaml"
    doc = _perf_doc(str(path.parent)).get("allocator")
    if not isinstance(doc, dict):
        raise MatrixError([f"{path.name}: allocator: expected a mapping of {', '.join(_RULES)}"])
    bad = [f"{path.name}: allocator.{k}: expected a positive integer, got {doc.get(k)!r}" for k in _RULES
           if isinstance(doc.get(k), bool) or not isinstance(doc.get(k), int) or doc[k] <= 0]
    if bad:
        raise MatrixError(bad)
    return AllocatorRules(**{k: int(doc[k]) for k in _RULES})
