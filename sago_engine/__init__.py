"""sago: stability of LLM behaviour under prompt variants (SAGO, arXiv 2610.01428)."""

__version__ = "0.1.0"
