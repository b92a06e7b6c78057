"""Wheel variants (PEP 825, draft): the properties envman derives from the matrix and records in the lock (the
check of a variants.json against the matrix is the workshop's: tests/tools/test_pep825.py).

The reference is PyTorch's own variant wheels: the properties of torch 2.8.0's cu126/cu128/cu129 variant wheels
(tests/fixtures/variants/README.md says where they were read)."""

from __future__ import annotations


def test_the_lock_records_the_framework_wheels_properties_outside_its_identity(matrix):
    from envman.app.resolve import resolve_request
    from envman.lock.lockfile import Lock, build_lock

    res = resolve_request("torch", "3.11", ["v100"], matrix=matrix)
    from envman.lockedstack import BaseImage, LockedBodies, LockedStack

    lock = build_lock(LockedStack(name="t", inputs_hash="0" * 64, res=res, base=BaseImage("python:3.11-slim-bookworm", "slim"),
                                  locked=LockedBodies(req="", fw="", pylock="")))
    assert lock["wheel_variants"]["wheels"] == {"torch": {"label": "cu126", "properties": {"nvidia": {
        "cuda_version_lower_bound": ["12.6"],
        "sm_arch": ["50_real", "60_real", "70_real", "75_real", "80_real", "86_real", "90_real"]}}}}
    assert lock["wheel_variants"]["status"].startswith("draft")
    # the same lock as before the field existed: the same identity (and so the same image tag)
    before = {k: v for k, v in lock.to_dict().items() if k not in ("wheel_variants", "lock_hash")}
    assert Lock.create(before).lock_hash == lock.lock_hash and lock.is_intact()
