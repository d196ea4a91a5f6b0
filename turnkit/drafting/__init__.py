"""Eager drafting: start the reply before the turn is confirmed, and let a
draft do only work that can be thrown away."""

from turnkit.drafting.drafter import Draft, DraftParams, DraftStats, EagerDrafter

__all__ = ["Draft", "DraftParams", "DraftStats", "EagerDrafter"]
