"""Dataset files are checked when loaded: a bad one is one error naming the file, what is wrong
and the fix; float images in [0, 1] are scaled, never blanked to zeros."""

import zipfile

import numpy as np
import pytest
import torchvision

from fedkd_core import data
from fedkd_core.data import DatasetFileError, load_dataset


def good_arrays(count: int = 30) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x_train": rng.integers(0, 256, (count, 28, 28), dtype=np.uint8),
            "y_train": np.arange(count) % 10,
            "x_test": rng.integers(0, 256, (count // 2, 28, 28), dtype=np.uint8),
            "y_test": np.arange(count // 2) % 10}


@pytest.fixture
def folder(tmp_path):
    data._load_cached.cache_clear()  # every test reads its own file afresh
    yield tmp_path
    data._load_cached.cache_clear()


def load_error(folder) -> str:
    with pytest.raises(DatasetFileError) as error:
        load_dataset("mnist", folder)
    message = str(error.value)
    assert str((folder / "mnist.npz").resolve()) in message and "Fix:" in message
    return message


def test_a_good_file_loads_as_uint8_images_and_int64_labels(folder):
    arrays = good_arrays()
    np.savez(folder / "mnist.npz", **arrays)
    dataset = load_dataset("mnist", folder)
    assert np.array_equal(dataset.x_train.numpy(), arrays["x_train"]) and dataset.y_test.dtype.is_signed


def test_float_images_in_0_1_are_scaled_back_exactly_not_blanked(folder):
    arrays = good_arrays()
    np.savez(folder / "mnist.npz", **{**arrays, "x_train": arrays["x_train"] / 255.0,
                                      "x_test": arrays["x_test"].astype(np.float32) / 255})
    with pytest.warns(UserWarning, match="floats in \\[0, 1\\]; scaled by 255"):
        dataset = load_dataset("mnist", folder)
    assert np.array_equal(dataset.x_train.numpy(), arrays["x_train"])  # a cast alone gives zeros
    assert np.array_equal(dataset.x_test.numpy(), arrays["x_test"])


def test_normalised_images_are_refused(folder):
    arrays = good_arrays()
    np.savez(folder / "mnist.npz", **{**arrays, "x_train": (arrays["x_train"] / 255.0 - 0.13) / 0.31})
    assert "x_train holds values from -0.4" in load_error(folder)


def test_a_truncated_archive_is_named(folder):
    np.savez(folder / "mnist.npz", **good_arrays())
    whole = (folder / "mnist.npz").read_bytes()
    (folder / "mnist.npz").write_bytes(whole[: len(whole) // 2])
    assert "not a readable .npz archive" in load_error(folder)


def test_overwritten_bytes_are_named(folder):
    np.savez(folder / "mnist.npz", **good_arrays())  # uncompressed: the zip's CRC finds the damage
    raw = bytearray((folder / "mnist.npz").read_bytes())
    raw[400:600] = bytes(200)
    (folder / "mnist.npz").write_bytes(bytes(raw))
    with zipfile.ZipFile(folder / "mnist.npz") as archive:
        assert archive.testzip() is not None  # the file really is damaged
    assert "not a readable .npz archive" in load_error(folder)


def test_a_missing_array_is_named(folder):
    arrays = good_arrays()
    del arrays["y_test"]
    np.savez(folder / "mnist.npz", **arrays)
    assert "no array(s) y_test" in load_error(folder)


def test_labels_counted_from_one_are_refused_with_the_fix(folder):
    arrays = good_arrays()
    np.savez(folder / "mnist.npz", **{**arrays, "y_train": arrays["y_train"] + 1})
    assert "y_train holds labels 1..10; this dataset's labels are 0..9 (they seem to count from 1: subtract 1)" \
        in load_error(folder)


@pytest.mark.parametrize("change, words", [
    (lambda a: {**a, "y_train": a["y_train"][:-1]}, "y_train has shape (29,)"),
    (lambda a: {**a, "x_train": np.stack([a["x_train"]] * 3, -1)}, "x_train has shape (30, 28, 28, 3)"),
    (lambda a: {**a, "x_test": a["x_test"][:, :20, :20]}, "both splits must hold images of one size"),
    (lambda a: {**a, "y_test": a["y_test"] + 0.5}, "y_test has dtype float64 with non-integer values"),
])
def test_wrong_shapes_and_labels_are_named(folder, change, words):
    np.savez(folder / "mnist.npz", **change(good_arrays()))
    assert words in load_error(folder)


def test_a_failed_download_names_an_absolute_path_and_leaves_no_empty_folder(tmp_path, monkeypatch):
    data._load_cached.cache_clear()

    class Unreachable:
        def __init__(self, root, train, download):
            (tmp_path / "data" / "MNIST" / "raw").mkdir(parents=True)  # what torchvision leaves behind
            raise RuntimeError("no internet")

    monkeypatch.setattr(torchvision.datasets, "MNIST", Unreachable)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="no internet") as error:
        load_dataset("mnist", "data")
    assert f"{tmp_path / 'data'}`" in str(error.value)  # the folder to install into, absolute
    assert not (tmp_path / "data").exists()
