"""An index's variants.json (PEP 825, draft) read and checked against the matrix's measured arch lists and CUDA
versions: the audit ``python -m tools.matrix variants`` runs. The properties envman derives for a build, and the
names of PEP 825, are envman's own (envman/matrix/variants.py: envman.lock records them)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from envman.matrix.variants import LOWER, NAMESPACE, NULL, SM, UPPER, Properties, properties_for
from envman.model import Cc, FrameworkRelease, Variant

_NAME = re.compile(r"^[a-z0-9_]+\Z")  # namespace and feature name
_VALUE = re.compile(r"^[a-z0-9_.]+\Z")
_LABEL = re.compile(r"^[0-9a-z_.]{1,16}\Z")
_SM_VALUE = re.compile(r"^(\d+)(\d)_(real|virtual)\Z")


# --- an index's variants.json ------------------------------------------------------------------------


@dataclass(frozen=True)
class VariantsJson:
    schema: str | None
    namespaces: tuple[str, ...]  # default-priorities.namespace
    variants: Mapping[str, Properties]  # label → properties


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" (the index would send a GPU a wheel that fails there) | "warn" | "info"
    label: str
    message: str


def parse_variants_json(doc: Any, source: str) -> tuple[VariantsJson, list[str]]:
    """The document, and every problem with its dotted path (``{source}: variants.cu128.nvidia: …``)."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        return VariantsJson(None, (), {}), [f"{source}: not a JSON object"]
    schema = doc.get("$schema")
    prio = doc.get("default-priorities")
    namespaces = prio.get("namespace") if isinstance(prio, dict) else None
    if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
        problems.append(f"{source}: default-priorities.namespace: missing (REQUIRED: a list of namespaces)")
        namespaces = []
    raw = doc.get("variants")
    if not isinstance(raw, dict):
        problems.append(f"{source}: variants: missing (REQUIRED: label → properties)")
        raw = {}
    variants: dict[str, Properties] = {}
    for label, props in raw.items():
        where = f"{source}: variants.{label}"
        if not _LABEL.match(str(label)):
            problems.append(f"{where}: not a variant label (^[0-9a-z_.]{{1,16}}$)")
            continue
        variants[label] = _properties(props, where, problems)
    used = {ns for p in variants.values() for ns in p}
    if used - set(namespaces):
        problems.append(f"{source}: default-priorities.namespace lacks {', '.join(sorted(used - set(namespaces)))} "
                        "(it MUST list every namespace the variants use)")
    return VariantsJson(schema if isinstance(schema, str) else None, tuple(namespaces), variants), problems


def _properties(props: Any, where: str, problems: list[str]) -> Properties:
    out: Properties = {}
    if not isinstance(props, dict):
        problems.append(f"{where}: not an object of namespaces")
        return out
    for ns, features in props.items():
        if not _NAME.match(str(ns)) or not isinstance(features, dict):
            problems.append(f"{where}.{ns}: not a namespace of features")
            continue
        for feat, values in features.items():
            ok = isinstance(values, list) and values and all(isinstance(x, str) and _VALUE.match(x) for x in values)
            if not _NAME.match(str(feat)) or not ok:
                problems.append(f"{where}.{ns}.{feat}: not a feature with a non-empty list of values")
                continue
            out.setdefault(ns, {})[feat] = list(values)
    return out


def variant_properties(variant: Variant) -> Properties:
    """The properties envman derives for a matrix variant (envman/matrix/variants.py), what its wheel should carry."""
    return properties_for(str(variant.cuda) if variant.cuda else None, [a.sm for a in variant.archs],
                          [p.sm for p in variant.ptx])


# --- the check ---------------------------------------------------------------------------------------


def _sm_set(values: Iterable[str], kind: str) -> set[str]:
    return {f"sm_{m.group(1)}{m.group(2)}" for v in values if (m := _SM_VALUE.match(v)) and m.group(3) == kind}


def check_variants(release: FrameworkRelease, doc: VariantsJson, wheel_labels: Iterable[str] = (),
                   arch: str = "x86_64") -> list[Finding]:
    """What the index says about ``release``'s variant wheels, against the matrix. An index that claims SASS
    the matrix did not measure would make an installer pick a wheel that fails on that GPU ("no kernel image");
    one that omits measured SASS makes it pass a wheel over. ``wheel_labels``: the labels of the variant wheels
    the index links (a label missing from variants.json makes its wheels unusable, PEP 825)."""
    out: list[Finding] = []
    for label in sorted(set(wheel_labels) - set(doc.variants)):
        out.append(Finding("warn", label, f"variant wheels labelled {label} are not in the variants.json "
                                          "(installers must treat them as incompatible)"))
    for label, props in sorted(doc.variants.items()):
        if label == NULL or not props:
            continue
        variant = release.variant(label)
        if variant is None:
            out.append(Finding("info", label, f"no {release.framework} {release.version} variant named {label} in "
                                              "envman's matrix: not checked"))
            continue
        out += _check_one(release, variant.on(arch), label, props.get(NAMESPACE, {}))
    return out


def _check_one(release: FrameworkRelease, v: Variant, label: str, nv: Mapping[str, list[str]]) -> list[Finding]:
    who = f"{release.framework} {release.version} {label}"
    out = []
    for kind, measured in (("real", {a.sm for a in v.archs if not a.suffix}),
                           ("virtual", {p.sm for p in v.ptx if not p.suffix})):
        said = _sm_set(nv.get(SM, []), kind)
        what = "SASS" if kind == "real" else "PTX"
        if said - measured:
            extra = " ".join(_sorted_sm(said - measured))
            if v.prov.uncertain:  # the matrix is not sure of this list: the index may well be right
                out.append(Finding("warn", label, f"{who}: the index says {what} for {extra}; envman's matrix has none, "
                                                  "but marks this variant uncertain: measure the wheel "
                                                  "(`python -m tools.matrix sync torch --wheel`)"))
            else:
                out.append(Finding("error", label, f"{who}: the index says {what} for {extra}, envman measured none "
                                                   "in the wheel: an installer would pick it for those GPUs and it "
                                                   "would fail there"))
        if measured - said:
            out.append(Finding("warn", label, f"{who}: the index omits {what} for {' '.join(_sorted_sm(measured - said))}, "
                                              "which the wheel carries: an installer would pass it over there"))
    out += _check_cuda(who, v, label, nv)
    return out


def _check_cuda(who: str, v: Variant, label: str, nv: Mapping[str, list[str]]) -> list[Finding]:
    if v.cuda is None:
        return []
    out = []
    for value in nv.get(LOWER, []):
        try:
            low = Version(value)
        except InvalidVersion:
            out.append(Finding("warn", label, f"{who}: {LOWER} {value!r} is not a version"))
            continue
        if low < Version(f"{v.cuda.major}.0"):
            out.append(Finding("error", label, f"{who}: {LOWER} {value} admits drivers of CUDA {low}, but a CUDA "
                                               f"{v.cuda.major}.{v.cuda.minor} build needs a CUDA {v.cuda.major} driver"))
        elif low < Version(f"{v.cuda.major}.{v.cuda.minor}"):
            out.append(Finding("info", label, f"{who}: {LOWER} {value} relies on CUDA minor-version compatibility "
                                              f"(envman's full floor is {v.cuda.major}.{v.cuda.minor}; PTX JIT, "
                                              "Triton and torch.compile can fail below it)"))
    for value in nv.get(UPPER, []):
        try:
            high = Version(value)
        except InvalidVersion:
            out.append(Finding("warn", label, f"{who}: {UPPER} {value!r} is not a version"))
            continue
        if high <= Version(f"{v.cuda.major}.{v.cuda.minor}"):
            out.append(Finding("error", label, f"{who}: {UPPER} {value} excludes every driver that runs a CUDA "
                                               f"{v.cuda.major}.{v.cuda.minor} build"))
    return out


def _sorted_sm(sms: Iterable[str]) -> list[str]:
    return sorted(sms, key=lambda s: Cc.parse(s))
