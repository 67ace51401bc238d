"""The Ray launcher (``--ray``) on a local Ray instance (2 CPUs, no dashboard, loopback only) with
the tiny random model: the merged shards are the store of one run, and a shard task killed
mid-run is retried by Ray, resumes its own shard store and gives the same store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import ray

from precompute.__main__ import main as cli_main
from precompute.config import load_config
from precompute.ray_launch import LaunchError, default_shards, launch, task_resources
from sago_engine.store import open_store, table_fingerprints
from tests.integration.precompute.test_runner import _cfg
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]
#: 4 prompts in 4 chunks: each of 2 shards runs 2 chunks, so a kill after the first leaves work to resume
CHUNKS = tiny_toml(chunk_prompts=1)

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # KillOnce travels to the worker by value


@pytest.fixture(scope="module")
def local_ray():
    """One Ray instance for the module (its start-up is the slow part): 2 CPUs, temp dir under /tmp."""
    tmp = tempfile.mkdtemp(prefix="sago-ray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no usage report leaves the machine
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, _node_ip_address="127.0.0.1",
             object_store_memory=100 * 1024 * 1024, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def conf(tmp_path_factory):
    """The module's config file: every run here gives its own --store, so the run records (which
    hold the TOML as read) agree."""
    return _cfg(tmp_path_factory.mktemp("conf"), CHUNKS)


@pytest.fixture(scope="module")
def reference(conf, tmp_path_factory):
    """table_fingerprints of one ordinary run of CHUNKS, in a fresh process with the one torch
    thread a 1-CPU Ray task runs (float sums depend on the thread count)."""
    store = tmp_path_factory.mktemp("single") / "s.duckdb"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "SAGO_THREADS": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "precompute", "--config", str(conf), "--store", str(store), "--no-progress"],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    return table_fingerprints(store)


def _load(conf, store):
    return replace(load_config(conf), store=str(store))


class KillOnce:
    """Launch hook: SIGKILL the worker running shard ``key`` after its first committed and published
    chunk, once (the marker file says it happened)."""

    def __init__(self, marker: str, key: str) -> None:
        self.marker, self.key = marker, key

    def __call__(self, key: str, done: int, total: int) -> None:
        if key == self.key and not os.path.exists(self.marker):
            Path(self.marker).write_text(f"{done}/{total}")
            os.kill(os.getpid(), signal.SIGKILL)


def test_ray_shards_merge_to_the_single_run_store(local_ray, conf, reference, tmp_path, capsys):
    store = tmp_path / "s.duckdb"
    cmd = ["--config", str(conf), "--store", str(store), "--ray", "auto", "--shards", "2", "--no-progress",
           "--publish-every", "0"]
    assert cli_main(cmd) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["shard"], x["attempts"], x["transfer"], x["pending"]) for x in lines[:-1]] == [
        ("1/2", 1, "path", 2), ("2/2", 1, "path", 2)]  # the driver sees the worker's folder: no bytes sent
    assert lines[-1]["shards"] == 2 and lines[-1]["units"] == 4
    assert table_fingerprints(store) == reference
    with open_store(store) as st:
        assert set(st.runs()["status"]) == {"complete"}
        assert st.meta()["status"] == "complete"
    shard_dir = tmp_path / "s.duckdb.ray"
    shard_units = []
    for f in sorted(shard_dir.glob("*.shard-*-of-2.duckdb")):
        with open_store(f) as st:
            shard_units.append(st.counts()["units"])
    assert shard_units == [2, 2]


def test_killed_shard_task_is_retried_to_the_identical_store(local_ray, conf, reference, tmp_path):
    cfg = _load(conf, tmp_path / "s.duckdb")
    marker = tmp_path / "killed"
    res = launch(cfg, shards=2, transfer="bytes", worker_dir=str(tmp_path / "worker"), publish_every_s=0.0,
                 progress=False, hook=KillOnce(str(marker), "tiny-random 1/2"))
    assert marker.read_text() == "6/12"  # killed after its first chunk: 1 prompt × (base + 5 variants) of 2
    tasks = {t["shard"]: t for t in res.tasks}
    assert tasks["1/2"]["attempts"] == 2 and tasks["2/2"]["attempts"] == 1
    # the retry resumed the killed attempt's shard store: one prompt left, not two
    assert tasks["1/2"]["summaries"][0]["pending"] == 1 and tasks["2/2"]["summaries"][0]["pending"] == 2
    assert res.transfer == "bytes"
    assert table_fingerprints(cfg.store) == reference


def test_killed_task_without_retries_fails_then_the_same_launch_resumes(local_ray, conf, reference, tmp_path):
    cfg = _load(conf, tmp_path / "s.duckdb")
    with pytest.raises(LaunchError, match=r"rerun the same command to resume\): tiny-random 2/2: .*died"):
        launch(cfg, shards=2, max_retries=0, publish_every_s=0.0, progress=False,
               hook=KillOnce(str(tmp_path / "killed"), "tiny-random 2/2"))
    assert not Path(cfg.store).exists()  # nothing merged from a failed launch
    # the same launch again: the finished shard has nothing to do, the killed one resumes its store
    res = launch(cfg, shards=2, publish_every_s=0.0, progress=False)
    assert {t["shard"]: (t["summaries"][0]["pending"], t["attempts"]) for t in res.tasks} == {"1/2": (0, 1),
                                                                                           "2/2": (1, 1)}
    assert table_fingerprints(cfg.store) == reference


def test_task_resources_follow_the_models_device():
    assert task_resources([("hf_local", "cuda")], 2, 0).num_gpus == 1
    assert task_resources([("hf_local", "cuda:3")], 2, 4).device == "cuda"  # Ray's GPU shows as the only one
    auto_gpu, auto_cpu = task_resources([("hybrid", "auto")], 2, 8), task_resources([("hf_local", "auto")], 2, 0)
    assert (auto_gpu.num_gpus, auto_gpu.device, auto_gpu.threads) == (1, "cuda", None)
    assert (auto_cpu.num_gpus, auto_cpu.device, auto_cpu.threads, auto_cpu.num_cpus) == (0, "cpu", 2, 2)
    api = task_resources([("openai", None)], 1, 8)  # an API model needs no GPU, even on a GPU cluster
    assert (api.num_gpus, api.device, api.num_cpus) == (0, None, 1)
    # a local judge on a GPU makes the task a GPU task
    assert task_resources([("openai", None), ("hf_local", "cuda")], 1, 1).num_gpus == 1


def test_default_shards_fill_the_cluster_up_to_the_chunks(tmp_path):
    cfg = load_config(_cfg(tmp_path, CHUNKS))  # tiny-random on auto
    assert default_shards(cfg, 4, {"CPU": 2.0}, 1) == 2
    assert default_shards(cfg, 4, {"CPU": 64.0}, 1) == 4  # never more shards than chunks
    assert default_shards(cfg, 40, {"CPU": 64.0, "GPU": 8.0}, 1) == 8  # on GPU: one shard per GPU
    assert default_shards(cfg, 40, {"CPU": 16.0}, 4) == 4


def test_cli_ray_options_are_checked(tmp_path, capsys):
    conf = str(_cfg(tmp_path, CHUNKS))
    assert cli_main(["--config", conf, "--ray", "auto", "--shard", "1/2"]) == 2
    assert "--shards N, not --shard K/N" in capsys.readouterr().err
    assert cli_main(["--config", conf, "--shards", "2"]) == 2
    assert "apply to --ray only" in capsys.readouterr().err
    # a CUDA model is the cluster's business: the config loads on a driver without a GPU
    cuda = _cfg(tmp_path, CHUNKS.replace("batch_size = 4", 'batch_size = 4\ndevice = "cuda"'))
    assert load_config(cuda, check_devices=False).models[0].device == "cuda"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_u15_a_stale_cluster_address_file_ends_in_a_clear_error(tmp_path):
    """U15: ``RAY_TMPDIR`` holds a ``ray_current_cluster`` naming a port where nothing listens;
    ``--ray auto`` ends within seconds (Ray alone waits minutes on the GCS) with an error naming
    the stale file and the fix, and exit status 2."""
    stale = tmp_path / "ray" / "ray_current_cluster"
    stale.parent.mkdir()
    stale.write_text(f"127.0.0.1:{_free_port()}\n")
    conf = str(_cfg(tmp_path, CHUNKS))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TMPDIR")}
    env.update(RAY_TMPDIR=str(tmp_path), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", SAGO_NO_COVERAGE="1")
    p = subprocess.run([sys.executable, "-m", "precompute", "--config", conf, "--ray", "auto", "--no-progress"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "no Ray cluster answers at 127.0.0.1:" in p.stderr and str(stale) in p.stderr
    assert f"rm {stale}" in p.stderr and "ray start --head" in p.stderr


def test_a_cluster_address_that_is_not_host_port_is_named(tmp_path, monkeypatch):
    from precompute.ray_launch import check_cluster_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(LaunchError, match=r"'not-an-address' \(from --ray\) is not HOST:PORT"):
        check_cluster_address("not-an-address")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{_free_port()}")
    with pytest.raises(LaunchError, match=r"\(from RAY_ADDRESS\) within 1 s.*fix RAY_ADDRESS"):
        check_cluster_address("auto", timeout_s=1)
