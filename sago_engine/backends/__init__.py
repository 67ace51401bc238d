"""Model backends: the ``Backend`` protocol, the registry of backends and a lazy factory (``get_backend``)."""

from .base import BACKENDS, Backend, DecodingConfig, get_backend, register_backend

__all__ = ["BACKENDS", "Backend", "DecodingConfig", "get_backend", "register_backend"]
