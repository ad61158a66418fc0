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
