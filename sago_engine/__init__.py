"""sago: stability of LLM behaviour under prompt variants (SAGO, arXiv 2610.01428)."""

__version__ = "0.1.0"

# before anything imports torch: OpenMP's idle threads sleep rather than spin (sago_engine.runtime.threads)
from sago_engine.runtime import threads as _threads  # noqa: E402,F401
