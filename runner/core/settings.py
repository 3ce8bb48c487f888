"""Settings from the environment (`PROOFLOCK_*`), overridable by CLI flags."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROOFLOCK_", extra="ignore")

    checkpoint_dir: Path = Path("checkpoints")
    cache_dir: Path = Path.home() / ".cache" / "prooflock"
    cache: bool = True
    backend: Literal["auto", "docker", "local"] = "auto"
    isolation: Literal["strict", "warm"] = "strict"
    timeout: int = Field(default=60, ge=1, le=30 * 86_400, description="seconds per check")
    memory_mb: int = Field(default=4096, ge=64, le=1 << 30)
    max_artifact_mb: float = Field(
        default=10, gt=0, description="an artifact larger than this is refused before any work"
    )
    pids: int = Field(default=512, ge=16)
    cpus: int = Field(default=1, ge=1)
    workers: int = Field(default=1, ge=1)
    batch: int = Field(
        default=8, ge=1, description="requests per worker call, where a prover batches"
    )
    retries: int = Field(default=2, ge=0, description="extra attempts after an infra_error")
    fsync_every: int = Field(default=1, ge=1, description="group commit: fsync once per N records")
    canary: float = Field(default=0, ge=0, le=100, description="percent re-checked cold")
    local_sandbox: Literal["auto", "off", "require"] = "auto"  # bubblewrap for local checks
    daemon: Literal["auto", "off", "start"] = "auto"  # use `prooflock serve` when it answers
    # Booted servers kept as snapshots (docker, CRIU) and restored instead of booting again.
    # One place per machine, whatever the cache dir: they are large, keyed by image ID, and
    # hold no results.
    snapshots: Literal["auto", "off"] = "auto"
    snapshot_dir: Path = Path.home() / ".cache" / "prooflock" / "snapshots"
    # Where builds fetch their inputs (runner.images.inputs); None: the lock's default. The
    # apt mirror is also where CRIU's bundle comes from; "host": this machine's own.
    apt_mirror: str | None = None
    apt_security_mirror: str | None = None
    pip_index: str | None = None
    ca_bundle: Path | None = None
    store: str | None = None  # s3://bucket/prefix holding build inputs by sha256
    deb_store: str | None = None  # the remote store's first name, still read
    build_missing: bool = False  # auto/docker: build a missing locked image instead of falling back
