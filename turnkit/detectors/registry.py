"""Detectors by name: ``create_detector("silence:stop_ms=500", clock)``.

A spec is ``name`` or ``name:key=value,key=value``; values are validated
against the detector's pydantic ``Params``, so a typo is a clear error
(:class:`DetectorSpecError`) rather than a silently ignored setting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError

from turnkit.clock import Clock

if TYPE_CHECKING:
    from turnkit.detectors.base import EndOfTurnDetector

__all__ = ["DetectorSpecError", "available", "create_detector", "parse_spec", "register"]

_REGISTRY: dict[str, type[EndOfTurnDetector]] = {}
D = TypeVar("D", bound="type[EndOfTurnDetector]")


class DetectorSpecError(ValueError):
    """A detector spec that names no detector or sets a bad parameter."""


def register(cls: D) -> D:
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def available() -> dict[str, type[EndOfTurnDetector]]:
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    name, _, rest = spec.strip().partition(":")
    name = name.strip()
    if not name:
        raise DetectorSpecError(f"detector spec {spec!r}: empty name")
    params: dict[str, str] = {}
    if rest.strip():
        for item in rest.split(","):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise DetectorSpecError(f"detector spec {spec!r}: expected key=value, got {item!r}")
            if key.strip() in params:
                raise DetectorSpecError(f"detector spec {spec!r}: {key.strip()} given twice")
            params[key.strip()] = value.strip()
    return name, params


def create_detector(spec: str, clock: Clock) -> EndOfTurnDetector:
    name, raw = parse_spec(spec)
    registry = available()
    cls = registry.get(name)
    if cls is None:
        raise DetectorSpecError(
            f"detector spec {spec!r}: unknown detector {name!r} (known: {', '.join(registry)})"
        )
    try:
        params = cls.Params.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(params)"
        known = ", ".join(cls.Params.model_fields)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = f"unknown parameter (known: {known})"
        raise DetectorSpecError(f"detector spec {spec!r}: {key}: {msg}") from None
    return cls(clock, params, spec=spec)


BUILTIN = ("silence", "smart_turn", "semantic_text", "llm_eou", "fused")


def _load_builtin() -> None:
    # Importing registers them; kept lazy so `import turnkit` stays light.
    # A detector whose optional model package is missing still registers:
    # it says which extra to install when it is created.
    import importlib

    for mod in BUILTIN:
        try:
            importlib.import_module(f"turnkit.detectors.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"turnkit.detectors.{mod}":
                raise
