"""The tutorials' models and the data paths: loaders (local files), tf.data sharding."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest

from accelml.datasets.loaders import PICKLE_OPT_IN
from accelml.dl.data import generated_images, load_image_data
from accelml.dl.models import MODELS, build_model
from accelml.errors import AccelmlError, SpecError


def test_national_lab_mnist_cnn_has_1199882_parameters():
    import keras

    assert build_model("mnist_cnn_dropout", keras, (28, 28, 1), 10).count_params() == 1_199_882


def test_mnist_cnn_layers_follow_the_tutorial():
    import keras

    model = build_model("mnist_cnn", keras, (28, 28, 1), 10)
    kinds = [(type(layer).__name__, getattr(layer, "kernel_size", None)) for layer in model.layers]
    assert kinds == [("Conv2D", (5, 5)), ("MaxPooling2D", None), ("Conv2D", (5, 5)),
                     ("MaxPooling2D", None), ("Flatten", None), ("Dense", None)]
    assert model.output_shape == (None, 10)


def test_every_small_model_builds_and_applications_take_size_and_classes():
    import keras

    for name in ("fashion_mnist_cnn", "mnist_cnn", "mnist_cnn_dropout", "mlp", "small_resnet"):
        assert build_model(name, keras, (28, 28, 1), 7).output_shape == (None, 7)
    resnet = build_model("resnet50v2", keras, (64, 64, 3), 5)
    assert resnet.output_shape == (None, 5) and resnet.input_shape == (None, 64, 64, 3)
    assert "resnet152v2" in MODELS


def test_unknown_model_and_impossible_shape_are_spec_errors():
    import keras

    with pytest.raises(SpecError, match="unknown model 'vgg'"):
        build_model("vgg", keras, (8, 8, 1), 10)
    with pytest.raises(SpecError, match="mnist_cnn.*cannot take input shape"):
        build_model("mnist_cnn", keras, (8, 8, 1), 10)


def test_digits_and_generated_images():
    digits = load_image_data("digits", train_samples=100)
    assert digits.x_train.shape == (100, 8, 8, 1) and digits.x_train.dtype == np.uint8
    assert len(digits.x_test) == 360 and digits.x_train.max() == 255
    images = generated_images(64, 16, size=12, seed=1)
    assert images.x_train.shape == (64, 12, 12, 3)
    assert np.array_equal(images.x_train, generated_images(64, 16, size=12, seed=1).x_train)


@pytest.mark.slow
def test_generated_images_are_learnable_but_not_trivially():
    # A small CNN after two short epochs: far above chance (0.1), below 1.0 (the images were
    # 1.0 for every model before: a 4x4 pattern per class plus noise). 8% of the test labels
    # are flipped, so no model can pass 0.92 on them.
    pytest.importorskip("jax", reason="jax is not installed")
    from accelml.datasets.loaders import IMAGE_LABEL_NOISE
    from accelml.dl import TrainingConfig, launch

    config = TrainingConfig(strategy="keras-fit", keras_backend="jax", model="fashion_mnist_cnn",
                            dataset="generated", image_size=12, train_samples=1200,
                            test_samples=400, batch_size=32, epochs=2, learning_rate=0.02,
                            seed=0, time_limit_s=300)
    accuracy = launch(config).test_accuracy
    assert accuracy is not None and 0.3 < accuracy <= 1 - IMAGE_LABEL_NOISE + 0.02


def test_generated_images_flip_a_fixed_share_of_labels_and_repeat_per_seed():
    from accelml.datasets.loaders import IMAGE_LABEL_NOISE
    from accelml.datasets.loaders import generated_images as arrays

    noisy, clean = arrays(500, 200, size=8, seed=3), arrays(500, 200, size=8, seed=3, label_noise=0)
    assert all(np.array_equal(a, b) for a, b in zip(noisy, arrays(500, 200, size=8, seed=3), strict=True))
    assert np.array_equal(noisy[0], clean[0]) and np.array_equal(noisy[2], clean[2])
    # exactly 8% of each split's labels name another class: the ceiling of any model's accuracy
    assert (noisy[1] != clean[1]).sum() == round(IMAGE_LABEL_NOISE * 500) == 40
    assert (noisy[3] != clean[3]).sum() == 16
    assert not np.array_equal(noisy[0], arrays(500, 200, size=8, seed=4)[0])


def test_keras_npz_layout_from_local_path(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=rng.integers(0, 255, (20, 28, 28), dtype=np.uint8),
             y_train=rng.integers(0, 10, 20, dtype=np.uint8),
             x_test=rng.integers(0, 255, (5, 28, 28), dtype=np.uint8),
             y_test=rng.integers(0, 10, 5, dtype=np.uint8))
    data = load_image_data("mnist", str(path))
    assert data.x_train.shape == (20, 28, 28, 1) and data.y_test.dtype == np.int32
    np.savez(tmp_path / "bad.npz", x_train=np.zeros(3))
    with pytest.raises(AccelmlError, match="lacks array"):
        load_image_data("mnist", str(tmp_path / "bad.npz"))


def test_fashion_mnist_idx_files_from_local_path(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (6, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 6, dtype=np.uint8)
    def idx(array):   # the IDX header: 0, 0, type (8: uint8), dims, then each dim (big endian)
        return (bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
                + array.tobytes())

    for prefix in ("train", "t10k"):
        with gzip.open(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", "wb") as handle:
            handle.write(idx(labels))
        with gzip.open(tmp_path / f"{prefix}-images-idx3-ubyte.gz", "wb") as handle:
            handle.write(idx(images))
    data = load_image_data("fashion_mnist", str(tmp_path))
    assert np.array_equal(data.x_train[..., 0], images)
    assert np.array_equal(data.y_test, labels)


def test_cifar10_batches_from_local_path(tmp_path, monkeypatch):
    monkeypatch.setenv(PICKLE_OPT_IN, "1")     # the user opts in for a folder of theirs
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with open(folder / name, "wb") as handle:
            pickle.dump({b"data": rng.integers(0, 255, (4, 3072), dtype=np.uint8),
                         b"labels": list(rng.integers(0, 10, 4))}, handle)
    data = load_image_data("cifar10", str(tmp_path), train_samples=12)
    assert data.x_train.shape == (12, 32, 32, 3) and data.x_test.shape == (4, 32, 32, 3)


def test_tf_data_shards_are_disjoint_equal_length_and_resized():
    import tensorflow as tf

    from accelml.dl.pipelines import steps_per_epoch, train_dataset

    x = np.arange(50, dtype=np.uint8).reshape(50, 1, 1, 1) * np.ones((1, 4, 4, 1), np.uint8)
    y = np.arange(50, dtype=np.int32)
    steps = steps_per_epoch(len(x), 2, 8)
    seen = []
    for rank in range(2):
        batches = list(train_dataset(tf, x, y, batch_size=8, steps=steps, rank=rank, size=2,
                                     seed=0, image_size=6))
        assert len(batches) == steps == 3
        assert batches[0][0].shape == (8, 6, 6, 1) and batches[0][0].dtype == tf.float32
        seen.append({int(v) for _, labels in batches for v in labels.numpy()})
    assert not seen[0] & seen[1]
    assert all(v % 2 == 0 for v in seen[0]) and all(v % 2 == 1 for v in seen[1])


def test_disk_cache_is_one_file_set_per_rank(tmp_path):
    import tensorflow as tf

    from accelml.dl.pipelines import train_dataset

    x = np.zeros((16, 2, 2, 1), np.uint8)
    y = np.zeros(16, np.int32)
    for rank in range(2):
        list(train_dataset(tf, x, y, batch_size=4, steps=2, rank=rank, size=2, cache="disk",
                           cache_dir=str(tmp_path)))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert any(n.startswith("train-0") for n in names) and any(n.startswith("train-1")
                                                               for n in names)
