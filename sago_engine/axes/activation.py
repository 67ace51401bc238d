"""Δ-Cos: activation drift of the last input token, averaged over layers (SAGO §Axes).

Also the Δ-Cos options (docs/METHOD.md "Axis options"), each stored as its own axis
``cos@<option>`` and computed from the same prefill: position ``user_last`` (last token of the
user's text) or ``user_mean`` (mean hidden state over the user's text tokens) instead of the
last input token, and the layer set "blocks" (transformer blocks only: layers 1..L, without the
embedding output, layer 0) instead of all L+1 hidden-state outputs. Naming: ``cos@user_last``,
``cos@user_mean`` (all layers), ``cos@last_blocks``, ``cos@user_last_blocks``,
``cos@user_mean_blocks``; and ``cos@last_layer``: the last input token, the last hidden-state
output only (the layer set "last": index L of the L+1 outputs, after the final norm in Hugging
Face models), as the SAGO authors' code reads Δ-Cos. R_X of every option = R_cos.
"""

from __future__ import annotations

import numpy as np

from sago_engine.axes.noise import snap_noise


def cosine_per_layer(h_variants: np.ndarray, h_base: np.ndarray) -> np.ndarray:
    """Cosine similarity per layer between each variant's and the base prompt's hidden states.

    Args:
        h_variants: (n, L+1, H) or (L+1, H) — last non-padding input token, embedding output
            and every layer (``GenerationResult.hidden_last``).
        h_base: (L+1, H) for the base prompt.
    Returns:
        (n, L+1) float64 (or (L+1,) for a single variant) in [−1, 1]. A zero vector against
        a zero vector counts as identical (1.0); a zero vector against a non-zero one as 0.0.
    Raises:
        ValueError: if the layer/hidden shapes differ.
    """
    hv = np.asarray(h_variants, dtype=np.float64)
    hb = np.asarray(h_base, dtype=np.float64)
    single = hv.ndim == 2
    if single:
        hv = hv[None]
    if hv.shape[1:] != hb.shape:
        raise ValueError(f"hidden-state shapes differ: {hv.shape[1:]} vs {hb.shape}")
    dot = np.einsum("nlh,lh->nl", hv, hb)
    nv = np.linalg.norm(hv, axis=-1)
    nb = np.linalg.norm(hb, axis=-1)[None, :]
    denom = nv * nb
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(denom > 0, dot / np.where(denom > 0, denom, 1.0), 0.0)
    both_zero = (nv == 0) & (nb == 0)
    cos = np.where(both_zero, 1.0, np.clip(cos, -1.0, 1.0))
    return cos[0] if single else cos


def delta_cos(h_variants: np.ndarray, h_base: np.ndarray) -> np.ndarray:
    """ΔCos = mean over layers of (cos(h_l(x^(v)), h_l(x)) − 1), SAGO §Axes.

    Uses every layer including the embedding output (layer 0). Under a chat template the last
    input token is the same template token for every prompt, so the layer-0 term is exactly 0;
    the definition is kept as the paper states it.

    Args/shapes as ``cosine_per_layer``. Returns (n,) float64 in [−2, 0] (0 iff identical
    directions at every layer); R_X = 2 maps it to [−1, 0].
    """
    return delta_cos_from_layers(cosine_per_layer(h_variants, h_base))


def delta_cos_from_layers(cos_layers: np.ndarray) -> np.ndarray:
    """ΔCos from per-layer cosines (…, L+1) already computed (e.g. to be stored): mean of (cos − 1).

    |ΔCos| below ``NOISE_TOL["cos"]`` (1e-6, float noise) is returned as exactly 0.
    """
    return snap_noise(np.mean(np.asarray(cos_layers, dtype=np.float64) - 1.0, axis=-1), "cos")


#: Δ-Cos option → (position, layer set): position "last" | "user_last" | "user_mean" (the
#: ``GenerationResult`` field ``hidden_last`` | ``hidden_user_last`` | ``hidden_user_mean``),
#: layers "all" (embedding output + every layer, as the paper) | "blocks" (layers 1..L only) |
#: "last" (layer L only).
COS_OPTION_SPECS: dict[str, tuple[str, str]] = {
    "user_last": ("user_last", "all"),
    "user_mean": ("user_mean", "all"),
    "last_blocks": ("last", "blocks"),
    "user_last_blocks": ("user_last", "blocks"),
    "user_mean_blocks": ("user_mean", "blocks"),
    "last_layer": ("last", "last"),
}


def delta_cos_layers(cos_layers: np.ndarray, layers: str = "all") -> np.ndarray:
    """ΔCos from per-layer cosines (…, L+1) over a layer set: ``"all"`` = ``delta_cos_from_layers``;
    ``"blocks"`` = mean of (cos − 1) over layers 1..L (the transformer blocks; the embedding
    output, index 0, left out); ``"last"`` = cos − 1 of layer L alone (the last entry).
    Returns (…) float64 in [−2, 0], |Δ| below ``NOISE_TOL["cos"]`` exactly 0. Raises ValueError
    for another layer set, or "blocks" / "last" with no block (L+1 < 2).
    """
    c = np.asarray(cos_layers)  # float64 in delta_cos_from_layers
    if layers == "all":
        return delta_cos_from_layers(c)
    if layers not in ("blocks", "last"):
        raise ValueError(f"layer set must be 'all', 'blocks' or 'last', got {layers!r}")
    if c.shape[-1] < 2:
        raise ValueError(f"{layers!r} needs at least one layer after the embedding output")
    return delta_cos_from_layers(c[..., 1:] if layers == "blocks" else c[..., -1:])


def delta_cos_option(option: str, h_variant: np.ndarray, h_base: np.ndarray) -> float:
    """ΔCos under one option for one (variant, base) pair of hidden states at that option's position.

    Args:
        option: a key of ``COS_OPTION_SPECS`` (e.g. ``"user_mean"``).
        h_variant, h_base: (L+1, H) states at the option's position (e.g. ``hidden_user_mean``).
    Returns:
        mean over the option's layer set of (cos(h_l(x^(v)), h_l(x)) − 1), in [−2, 0]; R_X = R_cos.
    Raises:
        KeyError: unknown option; ValueError: shapes differ.
    Source: SAGO (arXiv 2610.01428) §Axes (Δ-Cos), with the position / layer set of the option.
    """
    _, layers = COS_OPTION_SPECS[option]
    return float(delta_cos_layers(cosine_per_layer(h_variant, h_base), layers))
