"""The GPU session's script (benchmarks/gpu_session.py), exercised on the CPU: a lent GPU gives a
session about 15 minutes, too few to find a broken script there."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TINY_SWEEP = """profile: quick
methods: "fedavg,fedproto"
clients: "4"
alpha: 0.5
ablation_alphas: ""
table5: ""
seeds: 1
model: cnn5_code32
samples_per_client: 16
transfer_size: 32
rounds: 1
local_epochs: 1
batch_size: 8
lr: 0.001
drop_last: true
max_components: 2
local_test_size: 16
global_test_size: 32
last_rounds: 1
mixed_precision: false
reuse_reduced: false
"""


@pytest.fixture(scope="module")
def session():
    spec = importlib.util.spec_from_file_location("gpu_session", ROOT / "benchmarks" / "gpu_session.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_session"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_prediction_extends_the_cpu_count_by_its_per_client_growth(session):
    path = next((ROOT / "benchmarks" / "results").glob("device_memory_fedgmkd-*.json"))
    result = json.loads(path.read_text())
    rows = [dict(zip(result["columns"], values)) for values in result["rows"]]
    fedavg_50 = next(r for r in rows if r["method"] == "fedavg" and r["clients"] == 50)
    assert session.predicted_gib("fedavg", 50) == round(fedavg_50["needs GiB"], 2)
    assert session.predicted_gib("fedavg", 100) == round(fedavg_50["needs GiB"] + 50 * fedavg_50["MiB per client"] / 1024, 2)
    assert session.predicted_gib("no_such_method", 100) is None


def test_runs_are_shrunk_to_the_clients_and_images_asked_for(session):
    config = session.paper_configs("fedgmkd", "paper/fedgmkd.yaml", ("fedgmkd",))["fedgmkd"]
    assert session.images_per_client(config) == 500  # the paper's 500 images per client, as a pool of 10 x 500
    fifty = session.shrunk(config, clients=50, samples=None)
    assert (fifty.data.num_clients, session.images_per_client(fifty)) == (50, 500)
    hundred = session.shrunk(config, clients=100, samples=None)
    assert hundred.data.pool_size == 50_000 - config.data.transfer_size  # capped at what CIFAR-10 holds
    assert (hundred.rounds, hundred.train.epochs, hundred.model) == (2, 1, "resnet18_code32")
    assert session.images_per_client(session.shrunk(config, clients=4, samples=16)) == 16
    with pytest.raises(SystemExit, match="no_such_method"):
        session.paper_configs("fedgmkd", "paper/fedgmkd.yaml", ("no_such_method",))


def test_two_runs_differing_in_one_evaluation_are_not_identical(session):
    first = {"history": [{"round": 2, "alma": 0.5, "seconds": 1.0}]}
    assert session.evaluations(first) == session.evaluations({"history": [{"round": 2, "alma": 0.5, "seconds": 9.0}]})
    assert session.evaluations(first) != session.evaluations({"history": [{"round": 2, "alma": 0.5000001, "seconds": 1.0}]})


@pytest.fixture
def one_torch_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_session_runs_its_steps_on_a_cpu_and_writes_its_result_files(session, tmp_path, monkeypatch,
                                                                         one_torch_thread):
    monkeypatch.setattr(session, "DETERMINISM_METHODS", ("fedproto",))
    monkeypatch.setattr(session, "MEMORY_METHODS", ("fedavg",))
    monkeypatch.setenv("FEDKD_RESULTS", str(tmp_path / "results"))
    # One torch thread, here and in each sweep worker (the sweep's knob for shared cores): on two
    # busy cores a second thread made the runs several times slower (OpenMP's threads wait on each
    # other); the steps, their runs and the files they write are the same.
    monkeypatch.setenv("FEDKD_SWEEP_THREADS", "1")
    (tmp_path / "tiny.yaml").write_text(TINY_SWEEP)
    out = tmp_path / "out"
    session.main(["--out", str(out), "--device", "cpu", "--smoke", "--no-records", "--budget", "600",
                  "--sweep-params", str(tmp_path / "tiny.yaml")])
    summary = json.loads((out / "gpu_session.json").read_text())
    assert [row["identical"] for row in summary["gpu_determinism"]] == [True]
    assert [row["method"] for row in summary["gpu_peak_memory"]] == ["fedavg"]
    sweeps = summary["gpu_sweep_workers"]
    assert [(row["workers"], row["runs"], row["exit"]) for row in sweeps] == [(1, 2, 0), (2, 2, 0)]
    assert all(row["records agree"] == "2 shared, equal" for row in sweeps)
    written = {path.name.split("-")[0] for path in out.glob("*.json")}
    assert written == {"gpu_determinism", "gpu_peak_memory", "gpu_sweep_workers", "gpu_session.json"}


def test_steps_picks_the_named_steps_in_their_order_and_refuses_unknown_names(session):
    steps = (("gpu_determinism", 1), ("gpu_peak_memory", 2), ("gpu_sweep_workers", 3))
    errors = []
    assert session.chosen_steps(steps, None, False, errors.append) == steps
    assert session.chosen_steps(steps, "gpu_sweep_workers, gpu_peak_memory", False, errors.append) == steps[1:]
    assert session.chosen_steps(steps, None, True, errors.append) == ()  # --records-only
    assert session.chosen_steps(steps, "", False, errors.append) == () and not errors
    session.chosen_steps(steps, "gpu_peak_memory", True, errors.append)
    assert errors and "--records-only" in errors.pop()
    session.chosen_steps(steps, "gpu_peak_memroy", False, errors.append)
    assert errors and "gpu_peak_memroy" in errors[0] and "gpu_peak_memory" in errors[0]


def test_the_records_sweep_puts_all_its_workers_on_the_one_gpu(session):
    command = session.sweep_command("fedckd", Path("x.yaml"), 7)
    assert command[command.index("--workers") + 1] == "7"
    assert command[command.index("--per-gpu") + 1] == "7"  # the sweep refuses 7 workers at its default of 4
    assert "--robustness" not in command
    grid = session.sweep_command("fedgmkd", Path("notebooks/params/robustness/redesign/fedgmkd.yaml"), 12)
    assert "--robustness" in grid  # a robustness grid sweeps every variant's runs


def test_a_packed_dataset_unpacks_to_the_same_arrays_and_a_changed_one_is_refused(tmp_path, monkeypatch):
    import io
    import lzma

    import numpy as np

    spec = importlib.util.spec_from_file_location("gpu_pack", ROOT / "benchmarks" / "gpu_pack.py")
    pack = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pack)
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.integers(0, 256, (50, 28, 28), dtype=np.uint8), "y_train": rng.integers(0, 10, 50),
              "x_test": rng.integers(0, 256, (10, 28, 28), dtype=np.uint8), "y_test": rng.integers(0, 10, 10)}
    np.savez_compressed(tmp_path / "tiny.npz", **arrays)
    monkeypatch.setenv("FEDKD_DATA", str(tmp_path))
    [packed] = pack.pack("tiny", folder=tmp_path / "out")
    unpacked = np.load(io.BytesIO(lzma.decompress(packed.read_bytes())))
    assert sorted(unpacked.files) == sorted(arrays)
    assert all(np.array_equal(unpacked[k], arrays[k]) for k in arrays)
    original = lzma.decompress

    def corrupted(blob):  # a round trip that changes one pixel
        changed = dict(np.load(io.BytesIO(original(blob))))
        changed["x_train"][0, 0, 0] ^= 1
        buffer = io.BytesIO()
        np.savez(buffer, **changed)
        return buffer.getvalue()

    monkeypatch.setattr(pack.lzma, "decompress", corrupted)
    with pytest.raises(SystemExit, match="differ"):
        pack.pack("tiny", folder=tmp_path / "out")
    monkeypatch.setattr(pack.lzma, "decompress", original)
    assert 20 * 2**20 < pack.tracked_bytes() < pack.TRAVEL_LIMIT  # this repository's own tree, from git
    monkeypatch.setattr(pack, "tracked_bytes", lambda: pack.TRAVEL_LIMIT)  # a tree that fills the limit alone
    with pytest.raises(SystemExit, match="exceed"):
        pack.pack("tiny", folder=tmp_path / "out")
    assert pack.room_left(2**20, pack.TRAVEL_LIMIT - 3 * 2**20) == 2 * 2**20
    monkeypatch.setattr(pack, "tracked_bytes", lambda: 0)
    parts = pack.pack("tiny", folder=tmp_path / "out", parts=2)  # replaces the whole pack written above
    assert [p.name for p in parts] == ["tiny.npz.xz.1of2", "tiny.npz.xz.2of2"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["tiny.npz.xz.1of2", "tiny.npz.xz.2of2"]
    joined = b"".join(p.read_bytes() for p in parts)
    assert np.array_equal(np.load(io.BytesIO(lzma.decompress(joined)))["x_train"], arrays["x_train"])


def test_the_divergence_check_runs_the_diverged_paper_run_cut_short():
    spec = importlib.util.spec_from_file_location("gpu_divergence", ROOT / "benchmarks" / "gpu_divergence.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    from fedkd_core.results import config_hash

    config = check.pathological_config(seed=1, rounds=22, smoke=False)
    assert config.algorithm == "pfedsd" and config.rounds == 22 and config.data.partition == "pathological"
    full = check.pathological_config(seed=1, rounds=100, smoke=False)
    assert config_hash(full) == "e4d93f14b78c1811"  # the run that diverged on the H200 in round 18
    small = check.pathological_config(seed=1, rounds=1, smoke=True)
    assert small.data.num_clients == 10 and small.rounds == 1
