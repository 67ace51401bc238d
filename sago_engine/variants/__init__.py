"""Variant generation: the family registry, the (F, u, s, p) grid and seeded variant building.

SAGO (arXiv 2610.01428) §Variants: x_i^(v) = T_v(x_i) with v = (F, u, s, p). Every variant
carries its spec, its 63-bit seed and its generator, so the same (prompt, spec, run seed)
always yields the same text, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..registry import Registry
from ..seeds import derive_seed, make_rng, stable_hash
from ..types import POSITIONS, Variant, VariantSpec
from .base import Family, SubtypeInfo, check_setting
from .registry import UnknownFamilyError, family_registry

__all__ = [
    "FAMILIES", "Family", "SubtypeInfo", "UnknownFamilyError", "family_registry", "full_grid",
    "get_family", "list_families", "make_variant", "make_variants", "sample_grid", "spec_applies",
    "validate_spec", "variant_identity",
]

#: The one registry of families (lazy: a family's module is imported on first use).
FAMILIES: Registry[Family] = family_registry()
FAMILIES.register("social_register", "sago_engine.variants.social_register:SocialRegister")
FAMILIES.register("surface_noise", "sago_engine.variants.surface_noise:SurfaceNoise")
FAMILIES.register("structural", "sago_engine.variants.structural:Structural")


def get_family(name: str) -> Family:
    """The registered family called ``name``.

    Raises:
        UnknownFamilyError (a KeyError and a ValueError): unknown name; the message suggests
            close names (difflib) and lists the valid ones.
    Source: SAGO (arXiv 2610.01428) §Variants.
    """
    return FAMILIES[name]


def list_families() -> list[str]:
    """Registered family names in registration order (social_register, surface_noise, structural)."""
    return list(FAMILIES.names())


def full_grid(families: Iterable[str] | None = None) -> list[VariantSpec]:
    """Every valid (F, u, s, p), in a stable order: family (registry order, or the order given),
    then subtype (declaration order), strength (increasing), position (PREFIX, SUFFIX, GLOBAL).

    Args:
        families: family names to include; None = all registered.
    Returns:
        list of VariantSpec (currently 78 social_register + 27 surface_noise + 5 structural).
    Raises:
        UnknownFamilyError: an unknown family name.
    Source: SAGO (arXiv 2610.01428) §Variants.
    """
    names = list_families() if families is None else list(dict.fromkeys(families))
    grid = []
    for f in names:
        fam = get_family(f)
        for u, info in fam.subtypes.items():
            for s in info.strengths:
                for p in POSITIONS:
                    if p in info.positions:
                        grid.append(VariantSpec(f, u, float(s), p))
    return grid


def validate_spec(spec: VariantSpec) -> None:
    """Check that ``spec`` is a valid (F, u, s, p).

    Raises:
        ValueError: naming the invalid field and listing the valid options (an unknown family
            raises UnknownFamilyError, which is a ValueError too).
    Source: SAGO (arXiv 2610.01428) §Variants.
    """
    if not isinstance(spec, VariantSpec):
        raise ValueError(f"expected a VariantSpec, got {type(spec).__name__}")
    check_setting(get_family(spec.family), spec.subtype, spec.strength, spec.position)


def _seed_parts(run_seed: int, prompt_id: str, spec: VariantSpec, generator: str, phrasing_index: int):
    parts = [int(run_seed), str(prompt_id), spec.as_dict(), generator]
    if phrasing_index:
        parts.append(int(phrasing_index))
    return parts


def variant_identity(
    prompt_id: str, spec: VariantSpec, run_seed: int, generator: str, phrasing_index: int = 0
) -> tuple[int, str]:
    """``(seed, variant_id)`` of the variant ``make_variant`` builds with a family whose generator
    is ``generator`` — known before any text is produced (a resumed run finds stored LLM
    rewrites by it). Source: SAGO (arXiv 2610.01428) §Variants.
    """
    seed = derive_seed(*_seed_parts(run_seed, prompt_id, spec, generator, phrasing_index))
    return seed, stable_hash(prompt_id, spec.as_dict(), seed, generator)


def make_variant(
    prompt_id: str, text: str, spec: VariantSpec, run_seed: int, phrasing_index: int = 0,
    families: Mapping[str, Family] | None = None,
) -> Variant:
    """Build one variant x_i^(v) of the base prompt ``text``.

    seed = derive_seed(run_seed, prompt_id, spec.as_dict(), generator[, phrasing_index if ≠ 0]);
    the family's rng is ``make_rng`` of the same parts; variant_id = stable_hash(prompt_id,
    spec.as_dict(), seed, generator). Same inputs → same Variant, byte for byte.

    Args:
        prompt_id: the base prompt's id (unique across datasets).
        text: the base prompt, non-empty.
        spec: a valid VariantSpec.
        run_seed: the run's integer seed.
        phrasing_index: 0 for the canonical variant; 1, 2, ... draw further phrasings of the
            same spec (recorded in meta and in the seed).
        families: family name -> a family instance to use instead of the registry's (e.g.
            ``Structural(LLMRewriter(...))``); its ``generator`` enters the seed and the id.
    Returns:
        Variant with ``generator`` = the family's generator and ``meta`` = the family's meta
        plus ``phrasing_index`` and ``changed`` (text differs from the base).
    Raises:
        ValueError: empty/whitespace-only text, an invalid spec, or phrasing_index < 0.
    Source: SAGO (arXiv 2610.01428) §Variants.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"base prompt {prompt_id!r} is empty or whitespace-only")
    if phrasing_index < 0:
        raise ValueError(f"phrasing_index must be >= 0, got {phrasing_index}")
    validate_spec(spec)
    family = (families or {}).get(spec.family) or get_family(spec.family)
    parts = _seed_parts(run_seed, prompt_id, spec, family.generator, phrasing_index)
    seed, variant_id = variant_identity(prompt_id, spec, run_seed, family.generator, phrasing_index)
    out, meta = family.apply(text, spec.subtype, float(spec.strength), spec.position, make_rng(*parts))
    meta = dict(meta)
    meta.setdefault("changed", out != text)
    meta["phrasing_index"] = int(phrasing_index)
    return Variant(
        variant_id=variant_id,
        prompt_id=prompt_id,
        spec=spec,
        text=out,
        seed=seed,
        generator=family.generator,
        meta=meta,
    )


def make_variants(
    prompt_id: str, text: str, specs: Iterable[VariantSpec], run_seed: int,
    families: Mapping[str, Family] | None = None,
) -> list[Variant]:
    """``make_variant`` for each spec, in the order given (length = len(specs)); ``families``
    as in ``make_variant``.

    Raises:
        ValueError: as ``make_variant``.
    Source: SAGO (arXiv 2610.01428) §Variants.
    """
    return [make_variant(prompt_id, text, s, run_seed, families=families) for s in specs]


def spec_applies(text: str, spec: VariantSpec) -> bool:
    """Whether the family of ``spec`` can change ``text`` at all in that cell: its ``editable(text,
    u, s, p)`` (surface noise: False for case noise on a script without letter case, or a prompt
    that is all protected spans); True for a family without ``editable`` (it always rewrites).

    Raises:
        UnknownFamilyError: unknown family.
    Source: sago's rule that a variant which does not vary is no perturbation (SAGO §Variants).
    """
    editable = getattr(get_family(spec.family), "editable", None)
    return True if editable is None else bool(editable(text, spec.subtype, float(spec.strength), spec.position))


def sample_grid(
    prompt_id: str,
    per_family: dict[str, int],
    run_seed: int,
    families: Iterable[str] | None = None,
    keep: Callable[[VariantSpec], bool] | None = None,
    text: str | None = None,
) -> list[VariantSpec]:
    """A deterministic stratified sample of k specs per family for one prompt.

    For each family with grid G (``full_grid([f])``, |G| = m) and k = per_family[f]: an offset
    o = derive_seed(run_seed, prompt_id, "sample_grid", f) mod m, and the picks
    G[(o + ⌊j·m/k⌋) mod m] for j < k — k cells evenly spaced through the grid, so one prompt
    spreads over subtypes, strengths and positions, and over many prompts (offsets uniform
    by hashing) every cell is reached. k >= m returns the whole family grid.

    Args:
        prompt_id: the base prompt's id.
        per_family: family name -> k (>= 0).
        run_seed: the run's seed.
        families: families to sample (default: the keys of ``per_family``); a family missing
            from ``per_family`` gets k = 0.
        keep: optional predicate restricting each family's grid (e.g. to some positions)
            before sampling; a family left with no cell contributes nothing.
        text: the base prompt; when given, cells that cannot change it (``spec_applies``) are
            left out of the grid before sampling, so the k picks fall on cells that vary (fewer
            than k only when fewer cells apply). A prompt every cell applies to gets the same picks.
    Returns:
        list of VariantSpec, grouped by family in registry order, each group in grid order.
    Raises:
        UnknownFamilyError: unknown family; ValueError: negative k.
    Source: SAGO (arXiv 2610.01428) §Variants (the paper samples variants per prompt).
    """
    wanted = list(per_family) if families is None else list(families)
    for f in list(per_family) + wanted:
        get_family(f)  # raises with suggestions
    out: list[VariantSpec] = []
    for f in [f for f in list_families() if f in wanted]:
        k = int(per_family.get(f, 0))
        if k < 0:
            raise ValueError(f"per_family[{f!r}] must be >= 0, got {k}")
        grid = [g for g in full_grid([f]) if (keep is None or keep(g)) and (text is None or spec_applies(text, g))]
        m = len(grid)
        if m == 0:
            continue
        if k >= m:
            out.extend(grid)
            continue
        o = derive_seed(int(run_seed), str(prompt_id), "sample_grid", f) % m
        picks = sorted({(o + (j * m) // k) % m for j in range(k)})
        out.extend(grid[i] for i in picks)
    return out
