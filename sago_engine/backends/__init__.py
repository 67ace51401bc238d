"""Model backends: the ``Backend`` protocol and a lazy factory (``get_backend``)."""

from .base import BACKENDS, Backend, DecodingConfig, get_backend, register_backend

# server replies + local teacher-forced statistics; imported only when used
register_backend("hybrid", ".hybrid:HybridBackend")

__all__ = ["BACKENDS", "Backend", "DecodingConfig", "get_backend", "register_backend"]
