"""A stored run's numbers re-derived without generating: replay, rescore, rendered requests."""
