"""The engine: precision follows the hardware, device-resident batches, augmentation, faults."""

import json

import numpy as np
import pytest
import torch

from fedkd_core import precision
from fedkd_core.augment import AUGMENTATIONS, CropFlip
from fedkd_core.data import load_dataset
from fedkd_core.experiment import ExperimentConfig
from fedkd_core.federation import DataConfig
from fedkd_core.models import InputShape, make_model
from fedkd_core.rekey import rekey
from fedkd_core.cpuinfo import cpu_description
from fedkd_core.results import RecordError, config_hash, key_of, load_record, run_experiment
from fedkd_core.training import TrainConfig, iterate_batches, train

CPU = torch.device("cpu")


# --- precision -----------------------------------------------------------------------------------

@pytest.mark.parametrize("native", [True, False])
def test_auto_uses_bf16_exactly_where_the_cpu_has_it_natively(monkeypatch, native):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    assert precision.use_bf16("auto", CPU) is native
    assert precision.use_bf16(True, CPU) is True and precision.use_bf16(False, CPU) is False


def test_cpu_bf16_probe_reads_amx_or_avx512_bf16_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu sse avx2 fma\n")
    assert not precision._cpuinfo_has_bf16_flags(cpuinfo)
    cpuinfo.write_text("flags\t\t: fpu avx2 avx512f amx_tile amx_bf16\n")
    assert precision._cpuinfo_has_bf16_flags(cpuinfo)
    assert not precision._cpuinfo_has_bf16_flags(tmp_path / "missing")



ZEN1 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx2 fma\n"
ZEN4 = ("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
        "flags\t\t: fpu avx2 avx512f avx512_bf16\n\nprocessor\t: 1\nmodel name\t: something else\n")


def test_two_cpus_with_the_same_model_name_are_told_apart_by_family_model_and_vector_extension():
    assert cpu_description(ZEN1) == "AMD EPYC (family 23 model 1, AVX2)"
    assert cpu_description(ZEN4) == "AMD EPYC (family 25 model 17, AVX512-BF16)"
    sapphire = "cpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel Xeon\nflags\t: avx2 avx512f avx512_bf16 amx_bf16\n"
    assert cpu_description(sapphire) == "Intel Xeon (family 6 model 143, AMX)"
    assert cpu_description("model name\t: Some CPU\n") == "Some CPU"
    with pytest.raises(ValueError, match="names no CPU model"):
        cpu_description("flags\t: avx2\n")


def test_profiles_whose_records_are_committed_run_fp32_on_every_machine():
    import dataclasses
    from pathlib import Path

    import yaml

    from fedkd_core.chapters import chapter_module
    from fedkd_core.chapters.card import chapter_of

    params = Path(__file__).resolve().parents[1] / "notebooks" / "params"
    checked = 0
    for profile in ("paper", "reduced", "robustness", "tuning"):
        for path in sorted((params / profile).glob("*.yaml")) + sorted((params / profile).glob("redesign/*.yaml")):
            chapter = chapter_of(path)  # CHAPTER.yaml, or CHAPTER_PART.yaml for part of a profile
            fields = {f.name for f in dataclasses.fields(chapter_module(chapter).Params)}
            if "mixed_precision" in fields:
                assert yaml.safe_load(path.read_text())["mixed_precision"] is False, path
                checked += 1
    # a floor, not a count: a new profile yaml is checked without editing this test, and a glob that
    # stops matching (a moved folder) still fails it
    assert checked >= 22  # KnFu tuning, tuned Table 1, tuned Table 2 and FedMD original form (Table 1, Table 2); setting paper; KnFu paper (+ its MNIST 5-seed part) and robustness; FedCKD (+ its FMNIST n = 100 part and 5-seed reduced part), FedUA, FedGMKD paper, reduced (+ its 50-round redesign), robustness (+ its 50-round grid)


def test_precision_is_no_method_difference_so_an_fp32_record_stands_for_a_bf16_run():
    from dataclasses import replace

    from fedkd_core.chapters import fedckd, fedgmkd, fedua, knfu

    assert knfu.method_differences(replace(knfu.PAPER_PROFILE, mixed_precision="auto")) == []
    for chapter in (fedckd, fedgmkd, fedua):
        assert chapter.method_differences(replace(chapter.REDUCED_PROFILE, mixed_precision=True)) == []
        assert chapter.method_differences(replace(chapter.REDUCED_PROFILE, seeds=1, mixed_precision="auto")) == []


@pytest.mark.parametrize("bad", ["yes", "bf16", 1, None])
def test_mixed_precision_accepts_only_auto_true_false(bad):
    with pytest.raises(ValueError, match="mixed_precision must be 'auto', true or false"):
        TrainConfig(mixed_precision=bad)


def test_auto_is_the_default_setting():
    assert TrainConfig().mixed_precision == "auto"


def test_precision_is_not_part_of_a_records_key():
    base = ExperimentConfig(train=TrainConfig(mixed_precision="auto"))
    for setting in (True, False):
        other = ExperimentConfig(train=TrainConfig(mixed_precision=setting))
        assert config_hash(other) == config_hash(base)
    assert config_hash(ExperimentConfig(train=TrainConfig(lr=0.5))) != config_hash(base)


def test_fields_added_later_keep_old_records_keys_at_their_original_value():
    """drop_last (TrainConfig) and FedAvg's / FedProx's ``personal`` came after committed records:
    at the value that reproduces those runs the key is the one computed without the field."""
    for algorithm in ("fedavg", "fedprox"):
        base = ExperimentConfig(algorithm=algorithm)
        resolved = base.resolved()
        without = json.loads(json.dumps(resolved))
        del without["train"]["drop_last"], without["algorithm_params"]["personal"]
        assert key_of(resolved) == key_of(without) == config_hash(base)
        trained = ExperimentConfig(algorithm=algorithm, algorithm_params={"personal": "trained"})
        dropping = ExperimentConfig(algorithm=algorithm, train=TrainConfig(drop_last=True))
        assert len({config_hash(base), config_hash(trained), config_hash(dropping)}) == 3


# --- device-resident batches ---------------------------------------------------------------------

def test_resident_batches_are_the_per_batch_normalised_images_in_channels_last():
    dataset = load_dataset("cifar10")
    indices = np.array([5, 17, 3, 999, 42])
    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(len(indices), generator=torch.Generator().manual_seed(0))
    batches = list(iterate_batches(dataset, indices, 2, device=CPU, generator=generator))
    assert [len(b.y) for b in batches] == [2, 2, 1]
    x = torch.cat([b.x for b in batches])
    expected = dataset.to_float(dataset.x_train[torch.as_tensor(indices)[order]])
    torch.testing.assert_close(x, expected, rtol=0, atol=0)
    assert batches[0].x.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(torch.cat([b.position for b in batches]), order)
    assert torch.equal(torch.cat([b.y for b in batches]), dataset.y_train[torch.as_tensor(indices)[order]])


def test_drop_last_skips_only_the_incomplete_last_batch():
    dataset = load_dataset("mnist")
    indices = np.arange(9)
    sizes = [len(b.y) for b in iterate_batches(dataset, indices, 4, device=CPU, drop_last=True)]
    assert sizes == [4, 4]
    assert [len(b.y) for b in iterate_batches(dataset, indices[:8], 4, device=CPU, drop_last=True)] == [4, 4]
    assert [len(b.y) for b in iterate_batches(dataset, indices, 4, device=CPU)] == [4, 4, 1]


def test_resident_copy_is_made_once_per_device():
    dataset = load_dataset("mnist")
    assert dataset.on("cpu") is dataset.on(CPU)
    assert dataset.on(CPU).train.images.shape == (60000, 28, 28, 1)


def test_non_finite_loss_is_reported_once_per_epoch_with_the_settings():
    dataset = load_dataset("mnist")
    model = make_model("knfu_m1", InputShape(1, 28, 10), seed=0)
    config = TrainConfig(batch_size=8, lr=1e30, momentum=0.9, mixed_precision=False)
    with pytest.raises(FloatingPointError, match=r"lr=1e\+30.*precision=fp32"):
        train(model, dataset, np.arange(64), config, generator=torch.Generator().manual_seed(0))


# --- augmentation --------------------------------------------------------------------------------

def test_crop_flip_shifts_and_mirrors_each_image_by_its_draw():
    images = torch.arange(2 * 4 * 4 * 1, dtype=torch.float32).view(2, 4, 4, 1)
    fill = torch.tensor([-9.0])
    crop = CropFlip(padding=1)
    draws = torch.tensor([[1, 1, 0],    # offset (1, 1) = centre: unchanged
                          [0, 2, 1]])   # one row down (pad on top), one column left, mirrored
    out = crop.apply(images, draws, fill)
    assert torch.equal(out[0], images[0])
    padded = torch.full((6, 6, 1), -9.0)
    padded[1:5, 1:5] = images[1]
    assert torch.equal(out[1], padded[0:4, 2:6].flip(1))


def test_crop_flip_draws_cover_every_offset_and_both_flips():
    draws = CropFlip(padding=4).draw(4000, torch.Generator().manual_seed(0))
    assert set(draws[:, 0].tolist()) == set(range(9)) == set(draws[:, 1].tolist())
    assert 0.45 < draws[:, 2].float().mean() < 0.55


def test_padding_is_a_black_pixel_after_normalisation():
    dataset = load_dataset("cifar10")
    fill = dataset.on(CPU).fill
    torch.testing.assert_close(fill, -torch.tensor(dataset.mean) / torch.tensor(dataset.std))


def test_augmented_training_is_seeded_and_differs_from_plain():
    dataset = load_dataset("cifar10")
    indices = np.arange(64)

    def trained(augment):
        model = make_model("cnn5", InputShape(3, 32, 10), seed=0)
        config = TrainConfig(batch_size=16, lr=0.05, augment=augment, mixed_precision=False)
        train(model, dataset, indices, config, generator=torch.Generator().manual_seed(1))
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    assert torch.equal(trained("crop_flip"), trained("crop_flip"))
    assert not torch.equal(trained("crop_flip"), trained("none"))


def test_unknown_augmentation_is_a_clear_error():
    with pytest.raises(ValueError, match="augment must be one of"):
        TrainConfig(augment="mixup")
    assert AUGMENTATIONS["none"] is None


# --- records: bad files, rekeying ----------------------------------------------------------------

SMALL = ExperimentConfig(algorithm="local", data=DataConfig("mnist", num_clients=2, samples_per_client=40,
                                                            local_test_size=20),
                         train=TrainConfig(batch_size=20), rounds=1, global_test_size=100)


def test_unreadable_record_is_an_error_naming_the_file_and_the_way_out(tmp_path):
    record = run_experiment(SMALL, root=tmp_path, progress=False)
    path = tmp_path / "custom" / "local" / f"{record.key}.json"
    path.write_text(path.read_text()[:200])  # truncated, as by a killed write or a bad merge
    with pytest.raises(RecordError, match=rf"{path}.*truncated.*git checkout -- {path}"):
        load_record(SMALL, tmp_path)


def test_rekey_moves_records_written_before_augment_and_precision_left_the_key(tmp_path):
    record = run_experiment(SMALL, root=tmp_path, progress=False)
    path = tmp_path / "custom" / "local" / f"{record.key}.json"
    stored = json.loads(path.read_text())
    del stored["config"]["train"]["augment"]  # as written by the first version
    stored["config"]["train"]["mixed_precision"] = True
    old_key = "0123456789abcdef"
    path.unlink()
    (path.parent / f"{old_key}.json").write_text(json.dumps({**stored, "key": old_key}))
    assert load_record(SMALL, tmp_path) is None
    assert len(rekey(tmp_path)) == 1
    found = load_record(SMALL, tmp_path)
    assert found is not None and found.key == config_hash(SMALL) == key_of(found.config)
    assert found.history == record.history
    assert rekey(tmp_path) == []


def test_records_say_which_precision_and_device_ran_them(tmp_path):
    record = run_experiment(SMALL, root=tmp_path, progress=False)
    assert record.environment["precision"] in ("bf16", "fp32")
    assert record.environment["device"] == "cpu" and record.environment["device_name"]


# --- evaluation ----------------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["fedavg", "local"])
def test_evaluation_of_shared_models_equals_scoring_each_client_alone(algorithm):
    from fedkd_core.algorithms import Context, algorithm_class, algorithm_config
    from fedkd_core.experiment import _run_round, evaluate
    from fedkd_core.federation import build_federated_data
    from fedkd_core.training import accuracy

    data = build_federated_data(DataConfig("mnist", num_clients=3, samples_per_client=60, local_test_size=50), seed=0)
    ctx = Context(data=data, model_name="knfu_m1", train=TrainConfig(batch_size=20), device=CPU, seed=0)
    method = algorithm_class(algorithm)(algorithm_config(algorithm, {}), ctx)
    _run_round(method, 1, [0, 1, 2])
    global_test = np.arange(0, 10000, 7)
    result = evaluate(method, data, global_test)
    alone = [accuracy(method.personal_model(k), data.dataset, data.client_test[k]) for k in range(3)]
    np.testing.assert_allclose(result["client_accuracies"], alone, atol=1e-6)
    if method.global_model() is not None:
        assert result["global_acc"] == pytest.approx(accuracy(method.global_model(), data.dataset, global_test), abs=1e-6)


def test_rekey_never_overwrites_a_record_of_the_same_run(tmp_path):
    record = run_experiment(SMALL, root=tmp_path, progress=False)
    path = tmp_path / "custom" / "local" / f"{record.key}.json"
    stored = json.loads(path.read_text())
    del stored["config"]["train"]["augment"]
    twin = path.parent / "0123456789abcdef.json"  # the same run in another precision, old key
    twin.write_text(json.dumps({**stored, "key": "0123456789abcdef"}))
    assert rekey(tmp_path) == []
    assert twin.exists() and load_record(SMALL, tmp_path).history == record.history


def test_a_gpu_record_is_marked_in_the_precision_column_a_cpu_one_is_not():
    from types import SimpleNamespace

    from fedkd_core.results import record_precision

    def record(device, precision="fp32"):
        return SimpleNamespace(environment={"device": device, "precision": precision},
                               config={"train": {"mixed_precision": False}})

    assert record_precision(record("cpu")) == "fp32"
    assert record_precision(record("cuda:0", "bf16")) == "bf16 on GPU"
    old = SimpleNamespace(environment={}, config={"train": {"mixed_precision": True}})  # before precision was stored
    assert record_precision(old) == "bf16"
