"""How a local model computes on this machine: kernels, threads, the memory limit.

The lowest layer: imports nothing of sago (docs/ARCHITECTURE.md "Layers")."""
