"""Text end-of-turn modelling: recogniser-style normalisation, hashed
features and the packaged semantic-text model (numpy only at run time)."""

from turnkit.text.normalize import normalize_text

__all__ = ["normalize_text"]
