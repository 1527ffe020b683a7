"""The ``"format"`` markers of the files and folders dpipe writes, for the modules that write them and those that check them."""

from __future__ import annotations

__all__ = ["MODEL_FORMAT", "REGISTRY_FORMAT", "STORE_MANIFEST_NAME", "STORE_SCHEMA_VERSIONS"]

#: ``"format"`` of a model file (:class:`dpipe.model.LinearModel`)
MODEL_FORMAT = "dpipe-linear-model"
#: ``"format"`` of a model registry's ``registry.json`` (:mod:`dpipe.registry`)
REGISTRY_FORMAT = "dpipe-registry"
#: a store's manifest file (:mod:`dpipe.io._manifest`)
STORE_MANIFEST_NAME = "manifest.json"
#: the manifest ``schema_version`` values this dpipe reads
STORE_SCHEMA_VERSIONS = (1, 2, 3)
