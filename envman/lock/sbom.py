"""The lock as a software bill of materials: CycloneDX 1.6 JSON, written with the lock's other generated files
(``.envman/sbom.cdx.json``, ``.envman/sbom.P.cdx.json`` for profile P) and copied into the image
(``/opt/envman/sbom.cdx.json``).

Everything in it comes from the lock, nothing from a build: every Python package of pylock.toml with each of
its locked files (URL and sha256), the base image with its digest (or the note that it is unpinned), the apt
packages with their versions where the lock pins them, and the stack the resolver chose. Its bytes are a
function of the lock alone — the timestamp is the lock's SOURCE_DATE_EPOCH, the serial number is derived
from what it lists (not from the lock hash, which it also names: the lock records the digest of this file
with its own hash blanked out) — so it is one of the files a reproducible image holds, not a reason for two
builds to differ.

The document is built as plain JSON from the CycloneDX 1.6 schema (https://cyclonedx.org/docs/1.6/json/) and
package URLs from the purl specification (github.com/package-url/purl-spec: a pypi name lower-cased with ``_``
as ``-``, the version percent-encoded); the tests validate it against the schema with cyclonedx-python-lib's
strict validator. Building it takes ~1 ms for 126 packages (cyclonedx-python-lib took ~70 ms and ~60 ms of
imports), so no cache stands in front of it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from urllib.parse import quote

from envman.lock.pylock import parse_pylock
from envman.lockedstack import LockedStack

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://envman.dev/sbom")
Json = dict[str, object]


def purl(kind: str, name: str, version: str | None) -> str:
    """A package URL (purl-spec): ``pkg:pypi/name@version``; pypi names are normalised, versions encoded (``+``)."""
    if kind == "pypi":
        name = name.lower().replace("_", "-")
    return f"pkg:{kind}/{quote(name)}" + (f"@{quote(version, safe=':')}" if version else "")


def _iri(url: str) -> str:
    """A locked file's URL as the IRI reference CycloneDX's `url` is: characters RFC 3987 does not allow (a private
    index's `${ENVMAN_INDEX_…}` placeholder, a space) percent-encoded; reserved characters, `%` and an IPv6 host's
    brackets kept."""
    return quote(url, safe=":/?#[]@!$&'()*+,;=%~-._")


def _props(pairs: Sequence[tuple[str, str]]) -> list[Json]:
    return [{"name": k, "value": v} for k, v in pairs]


def _sha256(digests: Sequence[str]) -> list[Json]:
    return [{"alg": "SHA-256", "content": d} for d in digests]


def _component(kind: str, name: str, version: str | None, ref: str, more: Json) -> Json:
    """A component with the fields that have a value (CycloneDX leaves absent what is not known)."""
    return {"type": kind, "bom-ref": ref, "name": name, **({"version": version} if version else {}),
            **{k: v for k, v in more.items() if v}}


def _base_component(ref: str, digest: str | None) -> Json:
    image = ref.split("@")[0]
    name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (ref, "", "")
    props = [("envman:role", "base image")]
    if not digest:
        props.append(("envman:digest", "unpinned: no registry answered when locking"))
    return _component("container", name or ref, tag or None, f"base:{ref}",
                      {"hashes": _sha256([digest.split(":", 1)[1]]) if digest else [], "properties": _props(props)})


def _python_components(pylock_text: str | None) -> list[Json]:
    out = []
    for pkg in parse_pylock(pylock_text) if pylock_text else []:
        ref = purl("pypi", pkg.name, pkg.version)
        files = [{"type": "distribution", "url": _iri(f.url), **({"hashes": _sha256([f.sha256])} if f.sha256 else {})}
                 for f in pkg.files if f.url]
        out.append(_component("library", pkg.name, pkg.version, ref,
                              {"purl": ref, "hashes": _sha256(sorted({f.sha256 for f in pkg.files if f.sha256})),
                               "externalReferences": files}))
    return out


def _apt_components(apt: Mapping[str, str | None]) -> list[Json]:
    unpinned = _props([("envman:version", "not pinned: the archive's version at build time")])
    return [_component("library", name, version, f"apt:{name}",
                       {"purl": purl("deb", name, version), "properties": [] if version else unpinned})
            for name, version in sorted(apt.items())]


def stack_sbom(stack: LockedStack, lock_hash: str) -> str:
    """The SBOM's JSON text of the locked ``stack``, whose lock's identity is ``lock_hash``: the same lock gives the
    same bytes."""
    from envman.image.plan import stack_summary
    from envman.lock.lockfile import canonical_json

    apt = {a: stack.apt_pins.get(a) for a in sorted({*stack.apt, *stack.apt_pins})}  # None: not pinned
    sde, base, summary, pylock = stack.source_date_epoch or 0, stack.base, stack_summary(stack.res), stack.locked.pylock
    # what the serial number is derived from, under the names it always had (a new name would change every SBOM)
    listed = {"name": stack.name, "source_date_epoch": sde, "base_ref": base.ref, "base_digest": base.digest,
              "pylock_text": pylock, "apt": sorted(apt.items()), "stack": summary, "envman_version": stack.version,
              "properties": []}
    props = [("dev.envman.lock-hash", lock_hash), ("dev.envman.source-date-epoch", str(sde))]
    props += [(k, v) for k, v in (("dev.envman.stack", summary), ("dev.envman.version", stack.version)) if v]
    root = _component("container", stack.name, lock_hash[:12] or None, "image", {"properties": _props(props)})
    every = [_base_component(base.ref, base.digest), *_python_components(pylock), *_apt_components(apt)]
    unique: dict[str, Json] = {}  # bom-refs are unique in CycloneDX: a package listed twice is one component
    for part in every:
        unique.setdefault(str(part["bom-ref"]), part)
    parts = list(unique.values())
    refs = [str(p["bom-ref"]) for p in parts]
    doc = {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": f"urn:uuid:{uuid.uuid5(NAMESPACE, canonical_json(listed))}",
        "version": 1,
        "metadata": {"timestamp": datetime.fromtimestamp(sde, tz=timezone.utc).isoformat(),
                     "component": root},
        "components": parts,
        "dependencies": [{"ref": "image", "dependsOn": refs}, *({"ref": r} for r in refs)],
    }
    return _layout(doc)


def _layout(doc: Json) -> str:
    """One top-level field, and one component or dependency, a line: reviewable as a diff, and written by json's C
    encoder (``indent=`` takes its pure-Python one: 5 ms for 126 packages, against 0.5)."""
    def one(v: object) -> str:
        return json.dumps(v, ensure_ascii=False)

    fields = [f"  {one(k)}: [\n" + ",\n".join(f"    {one(x)}" for x in v) + "\n  ]" if isinstance(v, list) and v
              else f"  {one(k)}: {one(v)}" for k, v in doc.items()]
    return "{\n" + ",\n".join(fields) + "\n}\n"
