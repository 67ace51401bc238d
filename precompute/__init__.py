"""The offline runner of sago: ``python -m precompute --config ...`` (plan → run → score → write)."""
