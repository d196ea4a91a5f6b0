"""Barge-in: whether caller sound while the agent speaks takes the floor."""

from turnkit.barge_in.policy import BargeInPolicy, VADBargeIn

__all__ = ["BargeInPolicy", "VADBargeIn"]
