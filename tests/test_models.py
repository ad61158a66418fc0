"""Models: output shapes, the feature/head split, seeded initialisation."""

import pytest
import torch

from fedkd_core.models import MODELS, InputShape, make_model

SHAPES = {"grey": InputShape(1, 28, 10), "colour": InputShape(3, 32, 10)}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("kind", ["grey", "colour"])
def test_output_shape_and_feature_head_split(name, kind):
    shape = SHAPES[kind]
    model = make_model(name, shape, seed=0).eval()
    x = torch.randn(2, shape.channels, shape.size, shape.size)
    with torch.no_grad():
        features = model.features(x)
        logits = model(x)
        assert features.dim() == 2 and features.shape[0] == 2
        assert logits.shape == (2, 10)
        assert torch.allclose(model.head(features), logits)


def test_knfu_models_have_the_papers_layers():
    m1 = make_model("knfu_m1", SHAPES["grey"], seed=0)
    convs = [m.out_channels for m in m1.modules() if isinstance(m, torch.nn.Conv2d)]
    dense = [m.out_features for m in m1.modules() if isinstance(m, torch.nn.Linear)]
    assert convs == [32, 64] and dense == [64, 32, 10]
    m2 = make_model("knfu_m2", SHAPES["colour"], seed=0)
    convs = [m.out_channels for m in m2.modules() if isinstance(m, torch.nn.Conv2d)]
    dense = [m.out_features for m in m2.modules() if isinstance(m, torch.nn.Linear)]
    assert convs == [16, 16, 32, 32] and dense == [128, 10]


def test_initialisation_is_seeded_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = make_model("cnn5", SHAPES["colour"], seed=7)
    after = torch.rand(1)
    b = make_model("cnn5", SHAPES["colour"], seed=7)
    c = make_model("cnn5", SHAPES["colour"], seed=8)
    assert torch.equal(before, after)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))


def test_unknown_model_is_a_clear_error():
    with pytest.raises(ValueError, match="model must be one of"):
        make_model("vgg99", SHAPES["grey"], seed=0)


def test_fedgmkd_models_have_a_32d_feature_and_the_released_size():
    """FedGMKD's released model: torchvision ResNet-18 with a 32-d fc as the feature, then
    Linear(32, C); its fp32 state dict is 44,811,592 B on CIFAR-10 (specs/fedgmkd.md §5.1)."""
    for name in ("resnet18_code32", "cnn5_code32"):
        model = make_model(name, SHAPES["colour"], seed=0).eval()
        assert model.features(torch.zeros(2, 3, 32, 32)).shape == (2, 32)
        assert (model.head.in_features, model.head.out_features) == (32, 10)
    big = make_model("resnet18_code32", SHAPES["colour"], seed=0)
    assert sum(t.numel() * t.element_size() for t in big.state_dict().values()) == 44_811_592
    assert sum(p.numel() for p in make_model("cnn5_code32", SHAPES["colour"], seed=0).parameters()) == 64_206
