"""HOL Light's request options: placeholder names and libraries a warm parent preloads."""

from __future__ import annotations

from pydantic import Field, field_validator

from runner.provers.base import AdapterOptions
from runner.provers.hol_light import source


class HolLightOptions(AdapterOptions):
    placeholder: tuple[str, ...] = Field(
        source.DEFAULT_PLACEHOLDERS,
        description="names that mark an unfinished proof, comma-separated (default CHEAT_TAC)",
        json_schema_extra={"metavar": "NAMES"},
    )
    preload: tuple[str, ...] = Field(
        (),
        description="libraries a warm parent loads once, comma-separated, e.g. Library/prime.ml; "
        "used only for files whose first lines `needs` them in that order",
        json_schema_extra={"metavar": "PATHS"},
    )

    _placeholder = field_validator("placeholder", mode="before")(source.parse_placeholders)
    _preload = field_validator("preload", mode="before")(source.parse_preload)
