"""A Ray cluster as the launcher of a study: ``python -m precompute --config C --ray auto|ADDRESS``.

The study runs as Ray tasks and ends as the store one machine would have written:

1. **Plan, once.** One task builds the plan (prompts, variants, the semantic filter's verdicts,
   any ``[rewriter]`` rewrites) into a seed store, kept beside the output as
   ``<store>.ray/plan.duckdb`` and handed to the next launch, which reuses its rewrites and
   verdicts (``runner.make_plan`` skips what a store holds). Without this every shard would repeat
   the filter and, with an API rewriter, ask for its rewrites again.
2. **Shards.** For every model of the config and K = 1..N, a task runs ``runner.run`` on shard
   K/N of that model (prompt chunks i ≡ K−1 mod N) into a shard store that starts as the seed.
   A task asks Ray for the resources its model needs (``task_resources``): one GPU and
   ``cpus_per_task`` CPUs for a local model (hf_local, hybrid's local pass, a local judge) on
   ``cuda``, or on ``auto`` when the cluster has GPUs; ``cpus_per_task`` CPUs otherwise (API
   models, local models on CPU, which then use that many torch threads).
3. **Retries.** A task whose worker dies (killed, out of memory, node lost) is run again by Ray
   (``max_retries``). The retry finds its shard store where the dead attempt left it and
   ``runner.run`` resumes it (committed prompt units kept, none duplicated), so a retry redoes at
   most the chunk in flight. An exception raised by sago itself (a bad key, a bad store) is not
   retried: it is the same on every attempt.
4. **Gather and merge.** On a shared filesystem (the driver's ``<store>.ray/`` folder is visible
   from the worker, checked per task with a probe file) a task writes its shard store there; on
   a cluster without one it writes under ``worker_dir`` on its node and returns the file's bytes
   through Ray's object store, which the driver writes into ``<store>.ray/``. The driver merges
   every shard store of the config's models (``merge_stores``: keyed rows, the worst shard
   status, usage counted once per shard) into ``cfg.store``.

Progress: every task reports each committed chunk to a ``ProgressBoard`` actor (no CPU of its
own); the driver shows one tqdm line per shard, with the attempt number after a retry.

Rerunning the same command resumes: finished shards have nothing pending, killed ones resume
from their stores. The output store is rebuilt from the shard stores each time, so it must be a
store this launcher wrote (``meta.ray_launch``) or not exist yet: nothing else is overwritten.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from precompute.config import RunConfig
from precompute.ray_address import LaunchError, check_cluster_address
from sago_engine.seeds import stable_hash

log = logging.getLogger("sago.ray")

#: Environment variables of the driver passed to every task (offline switches, caches): settings
#: that can change what a task loads. Never an API key: keys come from each node's environment.
FORWARD_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME", "HF_HUB_CACHE", "SAGO_CACHE_DIR")
TRANSFERS = ("auto", "bytes")
_REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Resources:
    """What one task asks Ray for, and the device its local models are set to."""

    num_cpus: float
    num_gpus: int
    device: str | None
    """``"cuda"`` (the GPU Ray assigns shows as the only one) or ``"cpu"``; None: no local model."""
    threads: int | None
    """torch CPU threads (``SAGO_THREADS``) for a task on CPU; None on a GPU."""


@dataclass(frozen=True)
class ShardTask:
    """One (model, shard K/N) task of a launch."""

    model: str
    """``ModelConfig.name`` (its label, else its key)."""
    k: int
    n: int
    resources: Resources

    @property
    def key(self) -> str:
        """The shard's name on the progress lines and in errors: ``<model> K/N``."""
        return f"{self.model} {self.k}/{self.n}"

    @property
    def file(self) -> str:
        """The shard store's file name (``shard_file``)."""
        return shard_file(self.model, self.k, self.n)


def shard_file(model: str, k: int, n: int) -> str:
    """The file name of model ``model``'s shard K/N: ``<slug>-<hash>.shard-K-of-N.duckdb`` (the
    slug keeps ``[A-Za-z0-9._-]`` of the name, the hash keeps two labels apart)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:40]
    return f"{slug}-{stable_hash(model, length=8)}.shard-{k}-of-{n}.duckdb"


@dataclass
class LaunchResult:
    """What ``launch`` did: the merged store, the shard count, one entry per shard task."""

    out: str
    shards: int
    transfer: str
    """``"path"`` when every shard was written on a filesystem the driver sees, ``"bytes"`` when
    every shard came back through the object store, ``"mixed"`` otherwise."""
    tasks: list[dict] = field(default_factory=list)
    """Per task: ``key``, ``model``, ``shard`` ("K/N"), ``attempts``, ``transfer``, ``summaries``
    (``runner.run``'s, of the last attempt), ``node``."""
    counts: dict[str, int] = field(default_factory=dict)


def task_resources(backend_devices: list[tuple[str, str | None]], cpus_per_task: float,
                   cluster_gpus: float) -> Resources:
    """The resources of a task that runs these backends.

    Args:
        backend_devices: ``(backend, device)`` of every model the task loads (its model, a
            ``[judge]``, a ``[rewriter]``); ``device`` is the config's (``auto``, ``cpu``,
            ``cuda``, ``cuda:N``, ``mps``) and ignored for API backends.
        cpus_per_task: CPUs every task asks for (> 0); a CPU task runs that many torch threads
            (rounded down, at least 1).
        cluster_gpus: GPUs in the cluster (``ray.cluster_resources()``); ``auto`` means GPU when > 0.
    Returns:
        ``Resources``: one GPU when a local backend is on ``cuda``/``cuda:N``, or on ``auto`` with
        GPUs in the cluster; else CPUs only. The dtype does not decide: ``float16`` on a CPU is
        refused by the config check, ``bfloat16`` runs on either.
    """
    local = [d or "auto" for b, d in backend_devices if b in ("hf_local", "hybrid")]
    gpu = any(d.startswith("cuda") or (d == "auto" and cluster_gpus > 0) for d in local)
    if gpu:
        return Resources(num_cpus=cpus_per_task, num_gpus=1, device="cuda", threads=None)
    return Resources(num_cpus=cpus_per_task, num_gpus=0, device="cpu" if local else None,
                     threads=max(1, int(cpus_per_task)))


def _section_device(sec: dict | None) -> list[tuple[str, str | None]]:
    return [] if sec is None else [(sec["backend"], sec["kwargs"].get("device", "auto"))]


def default_shards(cfg: RunConfig, n_chunks: int, resources: dict[str, float], cpus_per_task: float) -> int:
    """N when ``--shards`` is not given: the parallel slots of the cluster, at most the chunks.

    A slot is a GPU for a model on GPU, ``cpus_per_task`` CPUs otherwise; the largest count over
    the config's models is used. One shard per slot keeps every slot busy while each shard loads
    its model and reads the plan once; more shards than chunks would only add empty shards.

    Returns:
        An integer in [1, max(1, n_chunks)].
    """
    gpus, cpus = resources.get("GPU", 0.0), resources.get("CPU", 0.0)
    slots = 1
    for m in cfg.models:
        r = task_resources([(m.backend, m.device), *_section_device(cfg.judge)], cpus_per_task, gpus)
        slots = max(slots, int(gpus) if r.num_gpus else int(cpus // cpus_per_task))
    return max(1, min(slots, n_chunks))


def _with_device(cfg: RunConfig, m, device: str | None) -> RunConfig:
    """``cfg`` reduced to model ``m``, its local models (and judge) set to ``device``."""
    if device is None:
        return replace(cfg, models=(m,))
    mm = replace(m, device=device) if m.backend in ("hf_local", "hybrid") else m
    judge = cfg.judge
    if judge is not None and judge["backend"] == "hf_local":
        judge = {**judge, "kwargs": {**judge["kwargs"], "device": device}}
    return replace(cfg, models=(mm,), judge=judge)


class ProgressBoard:
    """Ray actor: the latest progress of every shard (``attempt``, ``done``/``total`` texts, ``state``)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def start(self, key: str) -> int:
        """A task (attempt) of ``key`` starts; returns its attempt number (1 = first)."""
        r = self.rows.setdefault(key, {"attempt": 0})
        r.update(attempt=r["attempt"] + 1, done=0, total=None, state="running")
        return r["attempt"]

    def update(self, key: str, done: int, total: int) -> None:
        self.rows.setdefault(key, {"attempt": 1}).update(done=done, total=total)

    def finish(self, key: str) -> None:
        self.rows.setdefault(key, {"attempt": 1})["state"] = "done"

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in self.rows.items()}


def _set_threads(threads: int | None) -> None:
    if threads:
        os.environ["SAGO_THREADS"] = str(threads)  # the model's backend applies it (hf_local.set_threads)
        import torch

        torch.set_num_threads(threads)  # the semantic filter's encoder runs before any backend


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.incoming-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _plan_task(cfg: RunConfig, previous: bytes | None, threads: int | None) -> bytes:
    """Ray task: the plan of ``cfg`` written into a fresh store (or into ``previous``, whose
    rewrites and verdicts are reused); returns the store file's bytes."""
    from precompute.runner import make_plan, write_plan
    from sago_engine.store import open_store

    _set_threads(threads)
    with tempfile.TemporaryDirectory(prefix="sago-plan-") as d:
        p = Path(d) / "plan.duckdb"
        if previous:
            p.write_bytes(previous)
        with open_store(p, read_only=False, create=True) as st:
            write_plan(st, make_plan(cfg, st))
            st.checkpoint()
        return p.read_bytes()


def _shard_task(cfg: RunConfig, task: ShardTask, seed: bytes, shared_dir: str, probe: tuple[str, str],
                local: tuple[str | None, str], transfer: str, board, publish_every_s: float,
                hook: Callable[[str, int, int], None] | None) -> dict:
    """Ray task: shard ``task`` of its model into its shard store; see the module docstring.

    ``local`` is (``worker_dir`` or None for this node's ``<tmp>/sago-ray``, the launch's folder
    name there), used when the driver's ``shared_dir`` is not visible here."""
    import ray

    from precompute.runner import run, work_path
    from sago_engine.textsafe import guarded_terminal

    try:
        attempt = ray.get(board.start.remote(task.key))
    except Exception:  # progress is best effort: a lost board never stops the work
        attempt, board = 0, None
    _set_threads(task.resources.threads)
    shared = False
    if transfer == "auto":
        try:
            shared = (Path(shared_dir) / probe[0]).read_text() == probe[1]
        except OSError:
            pass
    base = Path(shared_dir) if shared else Path(local[0] or Path(tempfile.gettempdir()) / "sago-ray") / local[1]
    target = base / task.file
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() and not work_path(target).exists():
        _write_atomic(target, seed)  # a first attempt starts from the plan; a retry resumes its store
    m = next(m for m in cfg.models if m.name == task.model)
    cfg = replace(_with_device(cfg, m, task.resources.device), store=str(target))

    def on_progress(_model: str, done: int, total: int) -> None:
        if board is not None:
            board.update.remote(task.key, done, total)
        if hook is not None:
            hook(task.key, done, total)

    with guarded_terminal():  # the worker's log (Ray's worker-*.out/err files) gets inert text
        summaries = run(cfg, progress=False, shard=(task.k, task.n), publish_every_s=publish_every_s,
                        on_progress=on_progress)
    if board is not None:
        board.finish.remote(task.key)
    out = {"key": task.key, "summaries": summaries, "attempt": attempt, "node": socket.gethostname()}
    if shared:
        out["path"] = str(target)
    else:
        out["data"] = target.read_bytes()
    return out


class _Bars:
    """One tqdm line per shard, fed from ``ProgressBoard.snapshot``."""

    def __init__(self, keys: list[str], enabled: bool) -> None:
        import sys

        from tqdm import tqdm

        from sago_engine.textsafe import one_line, raw_stream

        # the bars draw with control sequences of their own (raw stream); their labels are made inert
        self.bars = {k: tqdm(total=0, desc=one_line(k), unit="gen", position=i, leave=True, dynamic_ncols=True,
                             disable=not enabled, file=raw_stream(sys.stderr)) for i, k in enumerate(keys)}

    def show(self, snap: dict[str, dict]) -> None:
        for k, r in snap.items():
            b = self.bars.get(k)
            if b is None:
                continue
            total = r.get("total") or 0
            if b.total != total:
                b.total = total
            b.n = r.get("done", 0)
            b.set_postfix_str(("done" if r.get("state") == "done" else "running")
                              + (f", attempt {r['attempt']}" if r.get("attempt", 1) > 1 else ""), refresh=False)
            b.refresh()

    def close(self) -> None:
        for b in self.bars.values():
            b.close()


def _connect(address: str | None, verbose: bool):
    import ray

    if ray.is_initialized():  # a caller connected already (tests, notebooks): use that cluster
        return ray
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # an instance started here sends no usage report
    check_cluster_address(address)
    try:
        ray.init(address=address, log_to_driver=verbose, configure_logging=False)
    except ConnectionError as e:
        raise LaunchError(f"no Ray cluster at {address!r} ({e}); start one with `ray start --head` (and "
                          f"`ray start --address=HEAD:6379` on the other nodes). A cluster with token authentication "
                          f"(Ray's default for one started on a single machine) also needs RAY_AUTH_MODE=token here "
                          f"and the head's token (`ray get-auth-token` there) in ~/.ray/auth_token or "
                          f"RAY_AUTH_TOKEN_PATH") from None
    return ray


def _runtime_env() -> dict:
    env = {k: os.environ[k] for k in FORWARD_ENV if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join([str(_REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {"env_vars": env}


def _check_output(target: Path, owner: str) -> None:
    if not target.exists():
        return
    from sago_engine.store import StoreError, open_store

    try:
        with open_store(target, read_only=True) as st:
            mark = st.meta().get("ray_launch")
    except StoreError as e:
        raise LaunchError(f"{target}: {e}") from None
    if mark != owner:
        raise LaunchError(f"{target} exists and was not written by a --ray launch into {owner}; a --ray run "
                          f"rebuilds its store from the shard stores. Give another --store, or run without --ray.")


def launch(cfg: RunConfig, address: str | None = "auto", shards: int | None = None, cpus_per_task: float = 1.0,
           max_retries: int = 3, only_models: list[str] | None = None, progress: bool = True,
           transfer: str = "auto", worker_dir: str | None = None, publish_every_s: float = 30.0,
           hook: Callable[[str, int, int], None] | None = None, verbose: bool = False) -> LaunchResult:
    """Run ``cfg`` on a Ray cluster and merge the shards into ``cfg.store`` (module docstring).

    Args:
        address: ``"auto"`` (the cluster this machine belongs to), ``HOST:PORT`` or
            ``ray://HOST:10001``; ignored when this process is already connected (``ray.init``).
        shards: N, shards per model; default ``default_shards``.
        cpus_per_task: CPUs each task asks for (> 0), also its torch threads on CPU.
        max_retries: times Ray reruns a task whose worker died (0: never).
        only_models: run only these model keys or labels (``--model``); the output still holds
            the other models' shard stores of this N from earlier launches.
        transfer: ``"auto"`` (a shared path where the driver's ``<store>.ray/`` is visible, else
            bytes) or ``"bytes"`` (always through the object store).
        worker_dir: folder for shard stores on a worker without the shared path (default the
            worker's ``<tmp>/sago-ray``); each launch uses a subfolder named by driver and store.
        publish_every_s: each shard's snapshot interval (``runner.run``).
        hook: called in the task after each committed chunk with (shard key, done, total); for
            fault-injection tests.
    Returns:
        ``LaunchResult``.
    Raises:
        LaunchError: no cluster, ``cfg.store`` is not this launcher's, or a task failed after its
            retries (the error of each; finished shards are kept, rerun the same command).
        ValueError: a bad argument.
    """
    if transfer not in TRANSFERS:
        raise ValueError(f"transfer must be one of {', '.join(TRANSFERS)}, got {transfer!r}")
    if not cpus_per_task > 0 or max_retries < 0 or (shards is not None and shards < 1):
        raise ValueError("cpus_per_task must be > 0, max_retries ≥ 0 and shards ≥ 1")
    target = Path(cfg.store).resolve()
    shard_dir = target.with_name(target.name + ".ray")
    _check_output(target, str(shard_dir))
    models = [m for m in cfg.models if not only_models or m.key in only_models or m.name in only_models]
    ray = _connect(address, verbose)
    res = ray.cluster_resources()
    gpus = res.get("GPU", 0.0)
    shard_dir.mkdir(parents=True, exist_ok=True)
    renv = _runtime_env()

    # 1. the plan, once (its previous version reused)
    plan_file = shard_dir / "plan.duckdb"
    pres = task_resources(_section_device(cfg.rewriter), cpus_per_task, gpus)
    plan_cfg = cfg if cfg.rewriter is None or pres.device is None else replace(
        cfg, rewriter={**cfg.rewriter, "kwargs": {**cfg.rewriter["kwargs"], "device": pres.device}})
    plan_remote = ray.remote(_plan_task).options(num_cpus=pres.num_cpus, num_gpus=pres.num_gpus,
                                                 max_retries=max_retries, runtime_env=renv, name="sago plan")
    try:
        seed = ray.get(plan_remote.remote(plan_cfg, plan_file.read_bytes() if plan_file.exists() else None,
                                          pres.threads))
    except Exception as e:
        raise LaunchError(f"the plan task failed: {_cause(e)}") from None
    _write_atomic(plan_file, seed)
    from sago_engine.store import open_store

    with open_store(plan_file, read_only=True) as st:
        n_chunks = -(-st.counts()["prompts"] // cfg.chunk_prompts)
    n = shards or default_shards(replace(cfg, models=tuple(models)), n_chunks, res, cpus_per_task)
    log.info("%d shard(s) per model for %d model(s); cluster: %s", n, len(models), res)

    # 2. the shard tasks
    tasks = [ShardTask(m.name, k, n, task_resources([(m.backend, m.device), *_section_device(cfg.judge)],
                                                    cpus_per_task, gpus))
             for m in models for k in range(1, n + 1)]
    board = ray.remote(num_cpus=0)(ProgressBoard).options(name=f"sago-progress-{uuid.uuid4().hex[:8]}").remote()
    probe = (f".probe-{uuid.uuid4().hex}", uuid.uuid4().hex)
    (shard_dir / probe[0]).write_text(probe[1])
    local = (worker_dir, stable_hash(socket.gethostname(), str(target), length=12))  # per driver and store
    seed_ref = ray.put(seed)
    remote = ray.remote(_shard_task)
    refs = {remote.options(num_cpus=t.resources.num_cpus, num_gpus=t.resources.num_gpus, max_retries=max_retries,
                           retry_exceptions=False, runtime_env=renv, name=f"sago {t.key}").remote(
                cfg, t, seed_ref, str(shard_dir), probe, local, transfer, board, publish_every_s, hook): t
            for t in tasks}
    bars = _Bars([t.key for t in tasks], progress)
    done: dict[str, dict] = {}
    failed: list[str] = []
    try:
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for ref in ready:
                t = refs[ref]
                try:
                    done[t.key] = ray.get(ref)
                except Exception as e:
                    failed.append(f"{t.key}: {_cause(e)}")
            bars.show(ray.get(board.snapshot.remote()))
        snap = ray.get(board.snapshot.remote())
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    finally:
        bars.close()
        (shard_dir / probe[0]).unlink(missing_ok=True)
    if failed:
        raise LaunchError("shard task(s) failed (finished shards are kept; rerun the same command to resume): "
                          + "; ".join(failed))

    # 3. gather and merge
    result = LaunchResult(out=str(target), shards=n, transfer="")
    for t in tasks:
        r = done[t.key]
        path = shard_dir / t.file
        if "data" in r:
            _write_atomic(path, r["data"])
        elif Path(r["path"]) != path:
            raise LaunchError(f"{t.key}: the task wrote {r['path']}, expected {path}")
        result.tasks.append({"key": t.key, "model": t.model, "shard": f"{t.k}/{n}", "transfer": "bytes" if "data" in r
                             else "path", "attempts": snap.get(t.key, {}).get("attempt", r["attempt"]),
                             "summaries": r["summaries"], "node": r["node"]})
    kinds = {x["transfer"] for x in result.tasks}
    result.transfer = kinds.pop() if len(kinds) == 1 else "mixed"
    inputs = [shard_dir / shard_file(m.name, k, n) for m in cfg.models for k in range(1, n + 1)]
    result.counts = _merge(target, [p for p in inputs if p.exists()], str(shard_dir))
    return result


def _merge(target: Path, inputs: list[Path], owner: str) -> dict[str, int]:
    """Merge the shard stores into ``target`` (atomically replaced), marked as this launcher's."""
    from sago_engine.store import merge_stores, open_store
    from sago_engine.store.layout import set_aside_wal
    from sago_engine.store.merge import FAILED, status_rank

    tmp = target.with_name(f".{target.name}.ray-merge")
    counts = merge_stores(tmp, inputs, overwrite=True)
    with open_store(tmp, read_only=False) as st:
        statuses = list(st.runs()["status"])
        st.set_meta(ray_launch=owner, progress="done", status="failed" if FAILED in map(status_rank, statuses) else
                    "complete" if all(s == "complete" for s in statuses) else "incomplete",
                    published_at=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()))
        st.checkpoint()
    set_aside_wal(target)
    os.replace(tmp, target)
    return counts


def _cause(e: BaseException) -> str:
    """The short reason of a Ray error: the sago error inside a task error, else the error's first line."""
    inner = getattr(e, "cause", None)
    if isinstance(inner, BaseException):
        return f"{type(inner).__name__}: {inner}"
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
