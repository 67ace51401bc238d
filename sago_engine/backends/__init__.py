"""Model backends: the ``Backend`` protocol and a lazy factory (``get_backend``)."""

from .base import BACKENDS, DEFAULT_MAX_NEW_TOKENS, Backend, DecodingConfig, get_backend, register_backend

# server replies + local teacher-forced statistics; imported only when used
register_backend("hybrid", ".hybrid:HybridBackend")

__all__ = ["BACKENDS", "DEFAULT_MAX_NEW_TOKENS", "Backend", "DecodingConfig", "get_backend", "register_backend"]
