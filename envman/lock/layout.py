"""Every file one stack writes, in one home: plain names for the project's default stack, and
``envman.P.lock``, ``Dockerfile.P``, ``requirements.P.lock.txt`` … for the stack of profile P.

  envman.lock                         the stack (lock/lockfile.py): resolution, base image, apt packages, hashes
  Dockerfile                          the image (``Dockerfile.envman`` beside a Dockerfile of the repository's own)
  pylock.toml                         PEP 751: uv's one resolution
  requirements.lock.txt               every Python package, pinned with sha256 hashes: derived from pylock.toml
  requirements.framework.lock.txt     the subset the framework needs: its own image layer
  requirements.source.lock.txt        the source-only packages, with their sdists' hashes (the builder stage)
  requirements.build.lock.txt         what the builder stage builds them with, hashed
  .envman/requirements.rest.lock.txt  the image's last install when the builder built a package locked by URL:
                                      the lock without it (pip would fetch and build a `name @ url` line again)
  .envman/stack.json                  the expected stack the smoke test checks
  .envman/sbom.cdx.json               the lock as a CycloneDX SBOM, copied into the image (/opt/envman)
  envman.smoke.json                   the last smoke test's report, beside the lock
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LOCK_FILE = "envman.lock"
# a profile's lock: envman.P.lock, P a profile name as envman.yaml allows it
PROFILE_LOCK = re.compile(r"^envman\.([a-z0-9]+(?:[._-][a-z0-9]+)*)\.lock\Z")
# what a Dockerfile reads from the build context, for every stack: re-included whatever .dockerignore excludes
BUILD_INPUTS = ("!.envman/kit.py", "!.envman/stack*.json", "!requirements*.lock.txt", "!pylock*.toml",
                "!.envman/sbom*.cdx.json")


@dataclass(frozen=True)
class StackFiles:
    """Where one stack's files go (``profile`` None: the project's default stack)."""

    profile: str | None = None
    dockerfile: str = "Dockerfile"

    @classmethod
    def for_profile(cls, profile: str | None) -> StackFiles:
        return cls() if profile is None else cls(profile, f"Dockerfile.{profile}")

    @classmethod
    def of_lock(cls, name: str) -> StackFiles:
        """The stack whose lock is called ``name`` (``envman.P.lock`` → profile P; anything else: the default)."""
        m = PROFILE_LOCK.match(name)
        return cls.for_profile(m.group(1) if m else None)

    def _named(self, plain: str, profiled: str) -> str:
        return plain if self.profile is None else profiled.format(p=self.profile)

    @property
    def lock(self) -> str:
        return self._named(LOCK_FILE, "envman.{p}.lock")

    @property
    def req(self) -> str:
        return self._named("requirements.lock.txt", "requirements.{p}.lock.txt")

    @property
    def fw(self) -> str:
        return self._named("requirements.framework.lock.txt", "requirements.{p}.framework.lock.txt")

    @property
    def pylock(self) -> str:
        return self._named("pylock.toml", "pylock.{p}.toml")

    @property
    def source(self) -> str:
        return self._named("requirements.source.lock.txt", "requirements.{p}.source.lock.txt")

    @property
    def build(self) -> str:
        return self._named("requirements.build.lock.txt", "requirements.{p}.build.lock.txt")

    @property
    def rest(self) -> str:
        return self._named(".envman/requirements.rest.lock.txt", ".envman/requirements.{p}.rest.lock.txt")

    @property
    def stack(self) -> str:
        return self._named(".envman/stack.json", ".envman/stack.{p}.json")

    @property
    def sbom(self) -> str:
        """The lock as CycloneDX (lock/sbom.py), copied into the image."""
        return self._named(".envman/sbom.cdx.json", ".envman/sbom.{p}.cdx.json")

    @property
    def smoke_report(self) -> str:
        return self._named("envman.smoke.json", "envman.{p}.smoke.json")
