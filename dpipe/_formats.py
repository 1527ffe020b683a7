"""The ``"format"`` markers of the files and folders dpipe writes, for the modules that write them and those that check them."""

from __future__ import annotations

__all__ = ["MODEL_FORMAT", "REGISTRY_FORMAT"]

#: ``"format"`` of a model file (:class:`dpipe.model.LinearModel`)
MODEL_FORMAT = "dpipe-linear-model"
#: ``"format"`` of a model registry's ``registry.json`` (:mod:`dpipe.registry`)
REGISTRY_FORMAT = "dpipe-registry"
