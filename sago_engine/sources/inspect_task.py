"""Prompt records from an Inspect task (``inspect_ai``, UK AISI): ``tasks.py@task_name``.

sago takes the task's dataset — each sample's ``input`` as the prompt (with its ``choices``, when it
has any, as lettered lines after it), ``target`` as the reference, ``id`` as the id, ``metadata`` as
further fields (e.g. ``category = "subject"``) — and records the task's scorers (registry name and
arguments), which ``correctness.inspect_scorers`` runs on the stored replies where they are offline. It
leaves the solvers, tools and sandboxes: sago asks each model for one reply to one rewritten prompt,
and an agent loop or a tool would put more than the phrasing between the prompt and the reply.
Loading a task runs its Python file, as ``inspect eval`` does: use task files you trust.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import string
import sys
from pathlib import Path
from typing import Any

from sago_engine.datasets import DatasetError
from sago_engine.seeds import stable_hash


def _load_task(ref: str, base: Path):
    """The ``Task`` built by the ``@task`` function ``name`` of ``file.py`` (``ref = "file.py@name"``)."""
    from inspect_ai import Task

    file, _, name = ref.partition("@")
    path = (base / file).resolve()
    if not path.is_file():
        raise DatasetError(f"{path}: no such task file (inspect = {ref!r}, relative to {base})")
    if not name:
        raise DatasetError(f"inspect = {ref!r}: name the task as file.py@task_name")
    spec = importlib.util.spec_from_file_location(f"sago_inspect_{stable_hash(str(path), length=12)}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        with contextlib.chdir(path.parent):  # as inspect does: a task reads its data files next to it
            spec.loader.exec_module(module)
            fn = getattr(module, name, None)
            if not callable(fn):
                tasks = sorted(k for k, v in vars(module).items() if callable(v) and hasattr(v, "__wrapped__"))
                raise DatasetError(f"{path}: no task {name!r}" + (f"; its tasks: {', '.join(tasks)}" if tasks else ""))
            task = fn()
            if not isinstance(task, Task):
                raise DatasetError(f"{path}@{name}: returned {type(task).__name__}, not an inspect_ai Task")
            samples = list(task.dataset)
    finally:
        sys.path.remove(str(path.parent))
    return task, samples, path


def _input_text(sample: Any) -> tuple[str | None, str | None]:
    """(prompt text, problem) of a sample: its input string, or the text of a chat input made of user
    messages only; its choices appended as "A) …" lines."""
    value = sample.input
    if not isinstance(value, str):
        roles = {getattr(m, "role", None) for m in value}
        if roles != {"user"}:
            return None, (f"chat input with {', '.join(sorted(str(r) for r in roles - {'user'}))} messages: sago "
                          "rewrites one user prompt")
        value = "\n\n".join(m.text for m in value)
    if sample.choices:
        value += "\n\n" + "\n".join(f"{letter}) {c}" for letter, c in zip(string.ascii_uppercase, sample.choices))
    return value, None


def inspect_records(ref: str, base: Path) -> tuple[list[tuple[int, dict]], dict]:
    """The samples of an Inspect task as records ``{"prompt", "reference", "id", **metadata}``.

    Args:
        ref: ``"tasks.py@task_name"``, the file relative to ``base``.
    Returns:
        ((sample number from 1, record) pairs, the record of what was read: ``inspect``,
        ``task`` (its name), ``file``, ``samples``, ``scorers`` (registry names, e.g.
        ``["inspect_ai/match"]``), ``scorer_specs`` (``{"name", "params"}`` each: the arguments as
        JSON, a function kept by its name), ``leaves`` (what sago does not use)).
    Raises:
        DatasetError: no such file or task, not a Task, ``inspect_ai`` not installed (the extra).
    """
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise DatasetError(f"inspect = {ref!r} needs the package inspect-ai: pip install 'sago[inspect]'") from None
    from inspect_ai._util.registry import registry_params
    from inspect_ai.util import registry_info

    task, samples, path = _load_task(ref, base)
    records, problems = [], []
    for i, s in enumerate(samples, start=1):
        text, problem = _input_text(s)
        rec = {**(s.metadata or {}), "prompt": text, "reference": s.target if s.target != "" else None}
        if s.id is not None:
            rec["id"] = s.id
        if problem:
            problems.append((str(i), problem))
            rec.pop("prompt")
        records.append((i, rec))
    if problems:
        from sago_engine.datasets import problem_report

        raise DatasetError(problem_report(f"{ref} sample", problems))
    scorers = [registry_info(sc).name for sc in (task.scorer or [])]
    specs = [{"name": n, "params": json.loads(json.dumps(registry_params(sc), default=str))}
             for n, sc in zip(scorers, task.scorer or [])]
    info = {"inspect": ref, "task": task.name, "file": str(path), "samples": len(samples), "scorers": scorers,
            "scorer_specs": specs, "leaves": ["solver", "tools", "sandbox"]}
    return records, info
