"""What a build writes into the lock: the image it produced and how (the caller saves the lock)."""

from __future__ import annotations

from runner.images import context
from runner.images.base import BaseBuilt
from runner.images.build import BuildPlan, BuildResult
from runner.images.lock import ImagesLock


def record_build(plan: BuildPlan, result: BuildResult, docker_version: str) -> None:
    """The image entry of `plan.lock` now describes `result`, and the definitions it was built
    from as they are now."""
    entry = plan.entry
    plan.lock.images[plan.name] = entry.model_copy(
        update={
            "status": "built",
            "dockerfile_sha256": context.sha256_of(plan.dockerfile),
            "files": context.file_hashes(plan.images_root, plan.name),
            "image_id": result.image_id,
            "diff_ids": result.diff_ids,
            "packages": result.packages,
            "size_bytes": result.size_bytes,
            "built_with": {
                "base": result.base,
                **plan.inputs.provenance(),
                "docker": docker_version,
            },
        }
    )


def record_base(lock: ImagesLock, built: BaseBuilt) -> None:
    lock.base = built.entry
