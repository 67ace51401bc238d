"""What a store's shape (how many models and datasets the current selection holds) leaves a page to
show, as the sentence the page prints instead of an empty chart or a repeated table."""

from __future__ import annotations


def ranking_note(n_models: int, n_datasets: int) -> str | None:
    """Why Rankings has nothing to rank or reverse, or None when it has (≥ 2 models and ≥ 2 datasets).

    Ranks order models within a dataset (one model: rank 1 everywhere); a reversal is two models
    swapping order between two datasets (one dataset: none can be seen)."""
    if n_models < 2 and n_datasets < 2:
        return ("One model and one dataset in the current store and filters: there is nothing to rank (every "
                "rank is 1) and no dataset to compare with. Rankings need two or more models; reversals and the "
                "spread across datasets also need two or more datasets.")
    if n_models < 2:
        return ("One model in the current store and filters: every rank is 1 and no reversal can happen. Rankings "
                "need two or more models (the spread across datasets below still applies).")
    if n_datasets < 2:
        return ("One dataset in the current store and filters: the ranks below are that dataset's, and reversals "
                "(two models swapping order between datasets) and the spread across datasets need two or more.")
    return None


def per_dataset_note(n_datasets: int) -> str | None:
    """Why a per-dataset table would repeat the total (one dataset), or None."""
    if n_datasets == 1:
        return "One dataset in the current store and filters: SGS per dataset equals the total SGS above."
    return None
