"""The lock as a software bill of materials: CycloneDX 1.6 JSON (cyclonedx-python-lib), written with the
lock's other generated files (``.envman/sbom.cdx.json``, ``.envman/sbom.P.cdx.json`` for profile P) and copied
into the image (``/opt/envman/sbom.cdx.json``).

Everything in it comes from the lock, nothing from a build: every Python package of pylock.toml with each of
its locked files (URL and sha256), the base image with its digest (or the note that it is unpinned), the apt
packages with their versions where the lock pins them, and the stack the resolver chose. Its bytes are a
function of the lock alone — the timestamp is the lock's SOURCE_DATE_EPOCH, the serial number is derived
from what it lists (not from the lock hash, which it also names: the lock records the digest of this file
with its own hash blanked out) — so it is one of the files a reproducible image holds, not a reason for two
builds to differ.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from envman.lock.pylock import parse_pylock

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://envman.dev/sbom")


@dataclass(frozen=True)
class SbomInputs:
    name: str
    lock_hash: str
    source_date_epoch: int
    base_ref: str
    base_digest: str | None
    pylock_text: str | None
    apt: Mapping[str, str | None] = field(default_factory=dict)  # name → pinned version (None: not pinned)
    stack: str = ""
    envman_version: str = ""
    properties: Sequence[tuple[str, str]] = ()


def _base_component(ref: str, digest: str | None):
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.component import Component, ComponentType

    name, _, tag = ref.split("@")[0].rpartition(":") if ":" in ref.split("@")[0].rsplit("/", 1)[-1] else (ref, "", "")
    hashes = [HashType(alg=HashAlgorithm.SHA_256, content=digest.split(":", 1)[1])] if digest else []
    props = [Property(name="envman:role", value="base image")]
    if not digest:
        props.append(Property(name="envman:digest", value="unpinned: no registry answered when locking"))
    return Component(name=name or ref, version=tag or None, type=ComponentType.CONTAINER, bom_ref=f"base:{ref}",
                     hashes=hashes, properties=props)


def _python_components(pylock_text: str | None) -> list:
    from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, XsUri
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    out = []
    for pkg in parse_pylock(pylock_text) if pylock_text else []:
        purl = PackageURL("pypi", None, pkg.name, pkg.version)
        refs = [ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(f.url),
                                  hashes=[HashType(alg=HashAlgorithm.SHA_256, content=f.sha256)] if f.sha256 else [])
                for f in pkg.files if f.url]
        hashes = [HashType(alg=HashAlgorithm.SHA_256, content=s) for s in sorted({f.sha256 for f in pkg.files if f.sha256})]
        out.append(Component(name=pkg.name, version=pkg.version, type=ComponentType.LIBRARY, purl=purl,
                             bom_ref=str(purl), hashes=hashes, external_references=refs))
    return out


def _apt_components(apt: Mapping[str, str | None]) -> list:
    from cyclonedx.model import Property
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    out = []
    for name, version in sorted(apt.items()):
        purl = PackageURL("deb", None, name, version or None)
        props = [] if version else [Property(name="envman:version", value="not pinned: the archive's version at build time")]
        out.append(Component(name=name, version=version or None, type=ComponentType.LIBRARY, purl=purl,
                             bom_ref=f"apt:{name}", properties=props))
    return out


def warm() -> None:
    """Import cyclonedx ahead of need (called while uv resolves): a lock that changed renders its SBOM right after
    uv exits, and the library's import is a large part of that."""
    import cyclonedx.model.bom  # noqa: F401
    import cyclonedx.output.json  # noqa: F401


def render_sbom(inputs: SbomInputs, known: str | None = None) -> str:
    """The SBOM's JSON text: the same lock gives the same bytes. Kept on disk under the digest of its inputs, and
    trusted from there only when it is the SBOM the last lock recorded (``known``: the sha256 envman.lock's
    ``files`` holds for it), as the Dockerfile is (image/render.py): a current lock does not import cyclonedx,
    and no cached text reaches the project on the cache's word alone. The key leaves out cyclonedx's own
    version (looking it up costs a current lock more than the rest of this): a current lock keeps the SBOM it
    recorded, as it keeps its other files; a lock that changes renders it with the library installed."""
    import hashlib

    if not known:
        return _render(inputs)
    from envman.diskcache import cached

    def recorded(text: object) -> str:
        if not (isinstance(text, str) and hashlib.sha256(text.encode("utf-8")).hexdigest() == known):
            raise ValueError("not the SBOM the last lock recorded")
        return text

    def fresh(text: object) -> str:
        assert isinstance(text, str)
        return text

    key = hashlib.sha256(repr(inputs).encode("utf-8")).hexdigest()
    return cached("sbom", key, lambda: _render(inputs), recorded, fresh=fresh)


def _render(inputs: SbomInputs) -> str:
    from cyclonedx.model import Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6

    from envman.lock.lockfile import canonical_json

    listed = {k: v for k, v in vars(inputs).items() if k != "lock_hash"}
    listed["apt"], listed["properties"] = sorted(inputs.apt.items()), list(inputs.properties)
    bom = Bom(serial_number=uuid.uuid5(NAMESPACE, canonical_json(listed)))
    bom.metadata.timestamp = datetime.fromtimestamp(inputs.source_date_epoch, tz=timezone.utc)
    props = [Property(name="dev.envman.lock-hash", value=inputs.lock_hash),
             Property(name="dev.envman.source-date-epoch", value=str(inputs.source_date_epoch))]
    if inputs.stack:
        props.append(Property(name="dev.envman.stack", value=inputs.stack))
    if inputs.envman_version:
        props.append(Property(name="dev.envman.version", value=inputs.envman_version))
    props += [Property(name=k, value=v) for k, v in inputs.properties]
    root = Component(name=inputs.name, version=inputs.lock_hash[:12] or None, type=ComponentType.CONTAINER,
                     bom_ref="image", properties=props)
    bom.metadata.component = root
    parts = [_base_component(inputs.base_ref, inputs.base_digest), *_python_components(inputs.pylock_text),
             *_apt_components(inputs.apt)]
    for c in parts:
        bom.components.add(c)
    bom.register_dependency(root, parts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the library warns about a graph without dependency edges between packages
        return JsonV1Dot6(bom).output_as_string(indent=2) + "\n"
