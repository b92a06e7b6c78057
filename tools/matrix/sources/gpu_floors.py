"""Per-GPU driver floors derived from NVIDIA's supported-GPU list (nvidia_gpus.Listing).

A GPU entry of gpus.yaml is matched to the list by its product-name aliases (the ones spelled like NVML
spells them, with capitals: "NVIDIA H100 80GB HBM3"; lower-case slugs such as "h100" are names people type
and are never matched). Its PCI device IDs are the IDs listed under those names; its first listing is the
first release whose table names one of those IDs.

That listing is the GPU's driver floor when its generation arrived after the list began (Ada, Hopper,
Blackwell and later: their generation floor in driver_floors is at or above the first release with a
table). For older generations (Turing, Ampere) the list starts after the proprietary modules already ran
them, so the listing is recorded but the floor stays the generation's. GPUs older than Turing are not in
the list (the open modules run Turing and later) and are marked proprietary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from tools.matrix.sources.nvidia_gpus import Listing, product_key

TURING = Version("7.5")


def product_names(entry: dict) -> list[str]:
    """The names of an entry that may be NVML product names: its aliases with a capital letter."""
    return [a for a in [entry.get("name", ""), *(entry.get("aliases") or [])]
            if isinstance(a, str) and any(ch.isupper() for ch in a)]


@dataclass
class Derived:
    gpu: str
    pci: dict[str, str] = field(default_factory=dict)  # device ID -> first release listing it
    names: list[str] = field(default_factory=list)  # product names NVIDIA lists under those IDs
    listed: str | None = None  # first release listing any of the IDs
    floor: bool = False  # the listing is the GPU's driver floor
    proprietary: bool = False  # older than Turing: not in the list at all
    source: str = ""
    note: str | None = None

    def rows(self) -> list[str]:
        """The entry's ``driver:`` block (gpus.yaml), as written by ``python -m tools.matrix sync nvidia-gpus``."""
        q = lambda s: '"' + s.replace('"', '\\"') + '"'  # noqa: E731
        if self.proprietary:
            return ["driver:", "  proprietary: true", f"  source: {q(self.source)}", f"  note: {q(self.note or '')}"]
        assert self.listed is not None  # only listed GPUs get a block otherwise
        out = ["driver:", f"  listed: {q(self.listed)}", f"  floor: {'true' if self.floor else 'false'}",
               "  pci: {" + ", ".join(f"{q(d)}: {q(t)}" for d, t in sorted(self.pci.items())) + "}",
               "  names: [" + ", ".join(q(n) for n in self.names) + "]", f"  source: {q(self.source)}"]
        if self.note:
            out.append(f"  note: {q(self.note)}")
        return out


def generation_floors(doc: dict) -> dict[Version, Version]:
    out = {}
    for e in doc.get("driver_floors") or []:
        try:
            out[Version(str(e["cc"]))] = Version(str(e["min_driver"]))
        except (KeyError, ValueError, TypeError):
            continue
    return out


def derive(doc: dict, lst: Listing) -> list[Derived]:
    """One Derived per non-Jetson GPU of gpus.yaml that the list names or that is older than Turing."""
    gens = generation_floors(doc)
    start = Version(lst.first_table or "0")
    out = []
    for e in doc.get("gpus") or []:
        if not isinstance(e, dict) or e.get("segment") == "embedded" or "id" not in e:
            continue
        try:
            cc = Version(str(e.get("cc")))
        except ValueError:
            continue
        d = _one(e, cc, gens.get(cc), start, lst)
        if d is not None:
            out.append(d)
    return out


def _one(e: dict, cc: Version, gen: Version | None, start: Version, lst: Listing) -> Derived | None:
    d = Derived(str(e["id"]))
    if cc < TURING:
        d.proprietary = True
        d.source = lst.tag_url(lst.newest or "")
        d.note = (f"not in NVIDIA's open-gpu-kernel-modules list ({lst.newest}), which covers Turing and later: "
                  "runs the proprietary kernel modules only")
        return d
    keys = {product_key(n) for n in product_names(e)}
    named = [r for r in lst.rows if product_key(r[4]) in keys]
    if not named:
        return None
    devices = sorted({r[2] for r in named})
    for dev in devices:
        d.pci[dev] = lst.first_listing(dev) or ""
    d.names = sorted({r[4] for r in named})
    d.listed = min(d.pci.values(), key=Version)
    d.floor = gen is not None and gen >= Version(f"{start.major}")
    d.source = lst.tag_url(d.listed)
    if not d.floor:
        d.note = (f"the list begins with {lst.first_table}; this generation ran on older drivers with the "
                  "proprietary modules, so its floor stays the generation's (driver_floors)")
    return d


def check(doc: dict, lst: Listing, file: str = "gpus.yaml") -> list[str]:
    """Where gpus.yaml disagrees with the list: a driver block that is not what the list gives, a floor below
    the first listing, a listed GPU without a block, an unlisted Turing-or-later GPU not marked uncertain."""
    want = {d.gpu: d for d in derive(doc, lst)}
    probs = []
    for e in doc.get("gpus") or []:
        if not isinstance(e, dict) or e.get("segment") == "embedded" or "id" not in e:
            continue
        gid = e["id"]
        have = e.get("driver")
        d = want.get(gid)
        where = f"{file}: gpus[{gid}].driver"
        if d is None:
            if have:
                probs.append(f"{where}: NVIDIA's list ({lst.newest}) names none of its product names; remove the block")
            elif not e.get("uncertain"):
                probs.append(f"{file}: gpus[{gid}]: not in NVIDIA's supported-GPU list ({lst.newest}) under "
                             f"{product_names(e) or 'any product name'}: mark it uncertain or fix its NVML names")
            continue
        probs += _compare(where, have if isinstance(have, dict) else {}, d)
    return probs


def _compare(where: str, have: dict[str, Any], d: Derived) -> list[str]:
    if not have:
        what = "'proprietary: true'" if d.proprietary else f"listed {d.listed} under {'/'.join(d.pci)}"
        return [f"{where}: missing ({what} in NVIDIA's list): run `python -m tools.matrix sync nvidia-gpus --write`"]
    if d.proprietary:
        return [] if have.get("proprietary") is True else [f"{where}: expected 'proprietary: true' ({d.note})"]
    probs = []
    if str(have.get("listed")) != d.listed:
        probs.append(f"{where}.listed: {have.get('listed')!r}, NVIDIA's list first names "
                     f"{'/'.join(d.pci)} in {d.listed} ({d.source})")
    if bool(have.get("floor")) != d.floor:
        probs.append(f"{where}.floor: {have.get('floor')!r}, expected {str(d.floor).lower()}")
    if {str(k): str(v) for k, v in (have.get("pci") or {}).items()} != d.pci:
        probs.append(f"{where}.pci: {have.get('pci')!r}, NVIDIA's list gives {d.pci}")
    if sorted(have.get("names") or []) != d.names:
        probs.append(f"{where}.names: {have.get('names')!r}, NVIDIA's list gives {d.names}")
    return probs


def plan(doc: dict, lst: Listing, text: str) -> tuple[str, list[str]]:
    """gpus.yaml with every derived ``driver:`` block written (and stale ones removed), a report line each."""
    from tools.matrix.yamledit import set_item_key

    want = {d.gpu: d for d in derive(doc, lst)}
    report = []
    for e in doc.get("gpus") or []:
        if not isinstance(e, dict) or "id" not in e or e.get("segment") == "embedded":
            continue
        gid, d = str(e["id"]), want.get(str(e["id"]))
        if d is None:
            if e.get("driver"):
                text = set_item_key(text, "id", gid, "driver", None)
                report.append(f"- {gid}: not in NVIDIA's list ({lst.newest}): driver block removed")
            else:
                report.append(f"~ {gid}: not in NVIDIA's list ({lst.newest}) under {product_names(e) or 'no product name'}")
            continue
        have = e.get("driver")
        if not _compare("", have if isinstance(have, dict) else {}, d):
            continue
        text = set_item_key(text, "id", gid, "driver", d.rows())
        if d.proprietary:
            report.append(f"+ {gid}: proprietary modules only (older than Turing)")
        else:
            floor = "its floor" if d.floor else "recorded; the floor stays its generation's"
            report.append(f"+ {gid}: listed from {d.listed} as {', '.join(d.names)} (PCI {', '.join(d.pci)}): {floor}")
    return text, report


def check_generations(doc: dict, matrix, file: str = "gpus.yaml") -> list[str]:
    """A generation's floor is the driver branch of the first CUDA release whose nvcc compiles for it
    (cuda.yaml archs and min_driver, themselves measured and cited): driver_floors may not say otherwise."""
    probs = []
    for i, e in enumerate(doc.get("driver_floors") or []):
        try:
            cc, floor = Version(str(e["cc"])), Version(str(e["min_driver"]))
        except (KeyError, ValueError, TypeError):
            continue
        sm = f"sm_{cc.major}{cc.minor}"
        first = min((c for c in matrix.cuda if sm in {a.sm for a in c.archs}), key=lambda c: c.version, default=None)
        if first is not None and floor.major != first.min_driver.major:
            probs.append(f"{file}: driver_floors[{i}].min_driver: '{e['min_driver']}' for {e['cc']}, but the first CUDA "
                         f"release that compiles {sm} is {first.label} (driver {first.min_driver}, cuda.yaml)")
    return probs
