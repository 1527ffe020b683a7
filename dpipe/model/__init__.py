"""The model artifact; importing it needs numpy only."""

from ._linear import MODEL_FORMAT, MODEL_FORMAT_VERSION, LinearModel

__all__ = ["LinearModel", "MODEL_FORMAT", "MODEL_FORMAT_VERSION"]
