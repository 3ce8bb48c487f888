"""Where the results came from: prover installs, kit versions, hosts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from runner.report.load import Run
from runner.report.text import visible, visible_block


@dataclass
class PinView:
    name: str  # the image's name in the lock
    tag: str
    locked_id: str
    agrees: bool | None  # whether the recorded image ID is the locked one
    status: str
    note: str
    inputs: list[tuple[str, str]]
    packages: int


@dataclass
class InstallView:
    kind: str
    provers: list[str]
    records: int
    image: str = ""
    image_id: str = ""
    facts: list[tuple[str, str]] = field(default_factory=list)  # what else identifies it
    pins: PinView | None = None
    pin_note: str = ""


@dataclass
class EnvironmentView:
    installs: list[InstallView]
    kit_versions: list[tuple[str, int]]
    hosts: list[tuple[str, int]]
    backends: list[tuple[str, int]]
    tools: list[tuple[str, str]]
    base: list[tuple[str, str]]  # the locked base image, when the lock has one


def environment_view(runs: list[Run], lock: dict[str, Any] | None) -> EnvironmentView:
    installs: dict[bytes, InstallView] = {}
    kits: Counter[str] = Counter()
    hosts: Counter[str] = Counter()
    backends: Counter[str] = Counter()
    tools: dict[str, Counter[str]] = {}
    for _, result in runs:
        install = result.environment.get("install")
        install = install if isinstance(install, dict) else {}
        key = orjson.dumps(install, option=orjson.OPT_SORT_KEYS)
        view = installs.get(key)
        if view is None:
            view = installs[key] = _install_view(install, lock)
        view.records += 1
        if visible(result.prover) not in view.provers:
            view.provers.append(visible(result.prover))
        provenance = result.provenance
        kits[visible(provenance.tools.get("prooflock", "unknown"))] += 1
        hosts[visible(provenance.host)] += 1
        backends[visible(f"{provenance.backend} / {provenance.isolation}")] += 1
        for name, value in provenance.tools.items():
            if name != "prooflock":
                tools.setdefault(visible(name), Counter())[visible(value)] += 1
    return EnvironmentView(
        installs=list(installs.values()),
        kit_versions=sorted(kits.items()),
        hosts=sorted(hosts.items()),
        backends=sorted(backends.items()),
        tools=[(name, ", ".join(sorted(values))) for name, values in sorted(tools.items())],
        base=_base(lock),
    )


def _install_view(install: dict[str, Any], lock: dict[str, Any] | None) -> InstallView:
    kind = str(install.get("kind", "unknown"))
    view = InstallView(kind=visible(kind), provers=[], records=0)
    if kind == "docker":
        view.image = visible(install.get("image") or "")
        view.image_id = visible(install.get("image_id") or "")
        view.pins = _pins(install, lock)
        if view.pins is None:
            view.pin_note = (
                "no images.lock.json (not a bundle)"
                if lock is None
                else "this image is not in the bundle's images.lock.json"
            )
    else:
        view.pin_note = "a local install: identified by its install facts, not by an image"
    view.facts = [
        (visible(name), visible_block(value))
        for name, value in sorted(install.items())
        if name not in ("kind", "image", "image_id")
    ]
    return view


def _pins(install: dict[str, Any], lock: dict[str, Any] | None) -> PinView | None:
    images = lock.get("images") if lock else None
    if not isinstance(images, dict):
        return None
    for name, entry in sorted(images.items()):
        if not isinstance(entry, dict):
            continue
        same_tag = entry.get("tag") and entry.get("tag") == install.get("image")
        same_id = entry.get("image_id") and entry.get("image_id") == install.get("image_id")
        if same_tag or same_id:
            inputs = entry.get("inputs")
            inputs = inputs if isinstance(inputs, dict) else {}
            packages = entry.get("packages")
            packages = packages if isinstance(packages, list) else []
            locked = entry.get("image_id")
            return PinView(
                name=visible(name),
                tag=visible(entry.get("tag") or ""),
                locked_id=visible(locked or "(not built)"),
                agrees=None if not locked else locked == install.get("image_id"),
                status=visible(entry.get("status") or ""),
                note=visible(entry.get("note") or ""),
                inputs=[(visible(k), visible(v)) for k, v in sorted(inputs.items())],
                packages=len(packages),
            )
    return None


def _base(lock: dict[str, Any] | None) -> list[tuple[str, str]]:
    base = lock.get("base") if lock else None
    if not isinstance(base, dict):
        return []
    keys = ("tag", "image_id", "registry_reference", "suite", "variant")
    return [(key, visible(base[key])) for key in keys if base.get(key)]
