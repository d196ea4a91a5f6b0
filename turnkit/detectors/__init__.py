"""End-of-turn detectors, addressed by spec strings through the registry."""

from turnkit.detectors.base import DetectorParams, EndOfTurnDetector
from turnkit.detectors.registry import (
    DetectorSpecError,
    available,
    create_detector,
    parse_spec,
    register,
)

__all__ = [
    "DetectorParams",
    "DetectorSpecError",
    "EndOfTurnDetector",
    "available",
    "create_detector",
    "parse_spec",
    "register",
]
