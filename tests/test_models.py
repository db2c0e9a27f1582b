import torch
from torch import nn

from fedcore.models import MLP, Affine


def test_affine_starts_as_identity_and_adds_before_multiplying():
    layer = Affine(3)
    x = torch.randn(4, 3)
    assert torch.equal(layer(x), x)
    with torch.no_grad():
        layer.b.fill_(1.0)
        layer.w.fill_(2.0)
    assert torch.allclose(layer(x), (x + 1) * 2)


def test_scalar_weight_is_one_number():
    layer = Affine(4, scalar_weight=True)
    assert layer.w.shape == (1,)
    with torch.no_grad():
        layer.w.fill_(-1.0)
    x = torch.randn(2, 4)
    assert torch.allclose(layer(x), -x)


def test_mlp_matches_paper_table_5():
    model = MLP(10, 3)
    linear = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linear] == [(10, 128), (128, 64), (64, 3)]
    assert sum(isinstance(m, nn.Tanh) for m in model.modules()) == 2
    assert [m.p for m in model.modules() if isinstance(m, nn.Dropout)] == [0.2, 0.2, 0.2]
    assert not any(isinstance(m, nn.BatchNorm1d) for m in model.modules())
    assert model.linear_names() == ["body.1", "body.4", "head"]


def test_mlp_outputs_log_probabilities():
    model = MLP(6, 4).eval()
    out = model(torch.randn(5, 6))
    assert out.shape == (5, 4)
    assert torch.allclose(out.exp().sum(1), torch.ones(5))


def test_batch_norm_variant_has_one_bn_per_hidden_layer():
    model = MLP(6, 2, batch_norm=True)
    assert sum(isinstance(m, nn.BatchNorm1d) for m in model.modules()) == 2
    assert model.features(torch.randn(3, 6)).shape == (3, 64)
