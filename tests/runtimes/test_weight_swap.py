"""The learnt weight swap on a conv followed by an eval BatchNorm, as a detector's conv+norm layers are:
the exporter folds the norm into the conv's weight, and the swap must reproduce that fold bit for bit. Then
values the exporter folds from a parameter (an expanded class token, an embedding looked up by constant ids,
a projection of learnt queries or of their first group, a position table sliced and permuted channels first,
the exp of half of each reference box): each rebuilt for an unseen seed bit for bit, and a fold no rule
explains refused."""

import numpy as np
import pytest
import torch

from exactness.runtimes import onnx_graph, weight_swap


class ConvNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.BatchNorm2d(4))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, pixel_values):
        return {"out": self.head(self.layer(pixel_values).mean(dim=(2, 3)))}


def _built(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = ConvNorm().eval()
    norm = model.layer[1]
    with torch.no_grad():  # statistics and scale that differ per seed, so the fold cannot pass as a constant
        norm.running_var.uniform_(0.5, 2.0)
        norm.running_mean.uniform_(-1.0, 1.0)
        norm.weight.uniform_(0.5, 1.5)
    return model


def _export(seed: int):
    model, inputs = _built(seed), {"pixel_values": torch.rand(2, 3, 8, 8)}
    return model, onnx_graph.export(model, inputs, dynamic=False)


def test_a_conv_and_batchnorm_fold_swaps_bit_identically_to_a_fresh_export():
    (a_model, a_graph), (b_model, b_graph), (c_model, c_graph) = _export(0), _export(1), _export(2)
    plan = weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)
    assert "batchnorm_fold" in {rule.kind for rule in plan.rules.values()}
    swapped = plan.initializers(c_model)
    fresh = c_graph.initializer_arrays()
    assert all(np.array_equal(swapped[name], fresh[name]) for name in swapped)


def test_without_the_fold_the_swap_is_refused():
    (a_model, a_graph), (b_model, b_graph) = _export(0), _export(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(weight_swap, "_batchnorm_folds", lambda model: {})
        with pytest.raises(weight_swap.SwapError, match="matches no model tensor"):
            weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)


class Tiny(torch.nn.Module):
    """A linear layer (stored transposed by the exporter) and two tensors that are no parameter or buffer: one
    the same for every seed, one drawn per seed (the exporter makes both initializers the model cannot explain)."""

    def __init__(self, width: int = 4):
        super().__init__()
        self.linear = torch.nn.Linear(3, width)
        self.fixed = torch.arange(width, dtype=torch.float32) + 1.0
        self.drawn = torch.rand(width)

    def forward(self, x):
        return {"out": self.linear(x) * self.fixed + (self.drawn if self.drawn_used else 0.0)}


def _tiny(seed: int, width: int = 4, drawn: bool = False):
    torch.manual_seed(seed)
    model = Tiny(width).eval()
    model.drawn_used = drawn
    return model, onnx_graph.export(model, {"x": torch.rand(2, 3)}, dynamic=False)


def test_exports_with_different_initializers_are_not_reusable():
    (a_model, a_graph), (b_model, b_graph) = _tiny(0), _tiny(1, width=5)
    with pytest.raises(weight_swap.SwapError, match="different initializers"):
        weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)


def test_seed_independent_values_stay_constants_and_the_rest_is_rebuilt_from_the_model():
    (a_model, a_graph), (b_model, b_graph), (c_model, c_graph) = _tiny(0), _tiny(1), _tiny(2)
    plan = weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)
    kinds = {rule.kind for rule in plan.rules.values()}
    assert "constant" in kinds and kinds & {"same", "transpose", "reshape"}, kinds
    swapped = plan.initializers(c_model)
    assert set(swapped) == {n for n, r in plan.rules.items() if r.kind != "constant"}  # constants are not swapped
    fresh = c_graph.initializer_arrays()
    assert all(np.array_equal(swapped[name], fresh[name]) for name in swapped)
    assert all(np.array_equal(plan.constants[name], fresh[name]) for name in plan.constants)


def test_a_seed_dependent_value_no_model_tensor_explains_is_refused():
    (a_model, a_graph), (b_model, b_graph) = _tiny(0, drawn=True), _tiny(1, drawn=True)
    with pytest.raises(weight_swap.SwapError, match="depends on the seed but matches no model tensor"):
        weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)


def test_a_0d_value_the_seed_decides_is_one_of_its_elements_or_refused_never_a_crash():
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    state = weight_swap._state(layer)
    linears = weight_swap._linears(layer, state)
    element = layer.weight.detach().numpy()[1, 2].copy()  # a 0-d copy: rebuilt from the seed's weight
    assert weight_swap._explain_seeded(element, state, linears).kind == "copies"
    assert weight_swap._explain_seeded(np.array(0.123, np.float32), state, linears) is None  # learn refuses it


# Values the exporter folds from a seed's parameters into constants that no model tensor holds as they are: each
# module below has one, and the swap must rebuild it by the rule named, bit for bit, for a seed it has not seen.


class ClassToken(torch.nn.Module):
    """A class token expanded over the batch and put before the sequence (CLIPSeg's and DepthPro's encoders):
    the exporter folds the `expand` into a constant of the expanded shape."""

    def __init__(self):
        super().__init__()
        self.token = torch.nn.Parameter(torch.randn(1, 1, 4))
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return {"out": self.linear(torch.cat([self.token.expand(x.shape[0], 1, 4), x], dim=1))}


class ConstantIds(torch.nn.Module):
    """An embedding looked up by ids fixed in the model (a token type, a level index): the exporter folds
    the lookup into a constant holding the rows it gathered."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(3, 4)
        self.register_buffer("ids", torch.tensor([[2, 0, 2]]), persistent=False)

    def forward(self, x):
        return {"out": x + self.table(self.ids)}


class LearntQueries(torch.nn.Module):
    """Learnt queries repeated over the batch, projected and split into heads as an attention layer's values
    (a detector's decoder): the exporter folds the projection of the parameter into a constant."""

    def __init__(self):
        super().__init__()
        self.queries = torch.nn.Embedding(3, 8)
        self.value = torch.nn.Linear(8, 8)

    def forward(self, probabilities):  # (batch, heads, targets, queries)
        values = self.value(self.queries.weight.unsqueeze(0).repeat(probabilities.shape[0], 1, 1))
        return {"out": probabilities @ values.view(probabilities.shape[0], 3, 2, 4).transpose(1, 2)}


class ChannelsFirstPositions(torch.nn.Module):
    """A ViT backbone's absolute positions (LwDetr's): the table's rows after the class token's, reshaped to
    the patch grid and permuted channels first before a resize; the exporter folds the slice, reshape and
    permute into a constant whose last axis is the grid's, not the row's."""

    def __init__(self):
        super().__init__()
        self.positions = torch.nn.Parameter(torch.randn(1, 1 + 2 * 3, 4))

    def forward(self, x):  # (batch, channels, height, width)
        grid = self.positions[:, 1:].reshape(1, 2, 3, 4).permute(0, 3, 1, 2)
        return {"out": x + torch.nn.functional.interpolate(grid, size=(2, 3), mode="bicubic", align_corners=False)}


class BoxSizes(torch.nn.Module):
    """Reference boxes' width and height half (LwDetr's decoder): the exporter folds the slice, expand and exp
    of the parameter into a constant, computing the exp with numpy."""

    def __init__(self):
        super().__init__()
        self.boxes = torch.nn.Embedding(4, 4)

    def forward(self, x):  # (batch, 3, 2)
        return {"out": x * self.boxes.weight[:3, 2:].exp().unsqueeze(0).expand(x.shape[0], -1, -1)}


class QueryGroups(LearntQueries):
    """Learnt queries in two groups, of which eval reads the first (LwDetr's `group_detr`): the folded
    projection is of the table's first rows."""

    def __init__(self):
        super().__init__()
        self.queries = torch.nn.Embedding(6, 8)

    def forward(self, probabilities):
        queries = self.queries.weight[:3].unsqueeze(0).repeat(probabilities.shape[0], 1, 1)
        return {"out": probabilities @ self.value(queries).view(probabilities.shape[0], 3, 2, 4).transpose(1, 2)}


class ScaledToken(ClassToken):
    """The class token doubled before use: a folded value no rule explains (a product, not a copy)."""

    def forward(self, x):
        return {"out": self.linear(torch.cat([(self.token * 2.0).expand(x.shape[0], 1, 4), x], dim=1))}


# the inputs only fix the graph's shapes: the folded values come from the parameters
_FOLDING = {ClassToken: {"x": torch.ones(2, 3, 4)}, ConstantIds: {"x": torch.ones(2, 3, 4)},
            LearntQueries: {"probabilities": torch.ones(2, 2, 5, 3)}, ScaledToken: {"x": torch.ones(2, 3, 4)},
            ChannelsFirstPositions: {"x": torch.ones(2, 4, 2, 3)}, BoxSizes: {"x": torch.ones(2, 3, 2)},
            QueryGroups: {"probabilities": torch.ones(2, 2, 5, 3)}}


def _folding(module: type, seed: int):
    torch.manual_seed(seed)
    model = module().eval()
    return model, onnx_graph.export(model, _FOLDING[module], dynamic=False)


@pytest.mark.parametrize(("module", "kind"), [(ClassToken, "broadcast"), (ConstantIds, "rows"),
                                              (LearntQueries, "projection"), (ChannelsFirstPositions, "copies"),
                                              (BoxSizes, "copies"), (QueryGroups, "projection")])
@pytest.mark.slow
def test_a_value_folded_from_a_parameter_is_rebuilt_for_another_seed_bit_for_bit(module, kind):
    (a_model, a_graph), (b_model, b_graph), (c_model, c_graph) = (_folding(module, seed) for seed in (0, 1, 2))
    with pytest.MonkeyPatch.context() as patch:  # the fold is what needs the rule: without it, the swap is refused
        patch.setattr(weight_swap, "_explain_seeded", lambda *args: None)
        with pytest.raises(weight_swap.SwapError, match="depends on the seed"):
            weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)
    plan = weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)
    assert kind in {rule.kind for rule in plan.rules.values()}
    swapped, fresh = plan.initializers(c_model), c_graph.initializer_arrays()
    assert all(np.array_equal(swapped[name], fresh[name]) for name in swapped)
    assert all(np.array_equal(plan.constants[name], fresh[name]) for name in plan.constants)


def test_copied_elements_name_the_position_each_element_copies():
    (a_model, a_graph), (b_model, b_graph) = _folding(ChannelsFirstPositions, 0), _folding(ChannelsFirstPositions, 1)
    plan = weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)
    copies = [rule for rule in plan.rules.values() if rule.kind == "copies"]
    positions = torch.arange(7 * 4).reshape(1, 7, 4)[:, 1:].reshape(1, 2, 3, 4).permute(0, 3, 1, 2)
    assert [rule.source for rule in copies] == ["positions"]
    assert np.array_equal(copies[0].index, positions.reshape(-1).numpy())


def test_a_folded_exp_of_copied_elements_names_its_function():
    (a_model, a_graph), (b_model, b_graph) = _folding(BoxSizes, 0), _folding(BoxSizes, 1)
    plan = weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)
    assert [(rule.source, rule.unary) for rule in plan.rules.values() if rule.kind == "copies"] == [
        ("boxes.weight", "exp")]


def test_copied_elements_refuse_a_value_in_no_position_and_take_the_first_of_equal_ones():
    source = np.array([[1.0, 2.0], [2.0, 3.0]], dtype=np.float32)
    assert weight_swap.copied_elements(source, np.array([3.0, 2.0, 1.0], np.float32)).tolist() == [3, 1, 0]
    assert weight_swap.copied_elements(source, np.array([2.5], np.float32)) is None
    assert weight_swap.copied_elements(source, np.array([-0.0], np.float32)) is None  # bits, not values
    assert weight_swap.copied_elements(source, np.array([1.0], np.float64)) is None


def test_a_folded_product_of_a_parameter_is_refused():
    (a_model, a_graph), (b_model, b_graph) = _folding(ScaledToken, 0), _folding(ScaledToken, 1)
    with pytest.raises(weight_swap.SwapError, match="nor a broadcast, gathered rows, a Linear projection or copied"):
        weight_swap.learn(a_graph, a_model, b_graph, b_model, 1)


def test_gathered_rows_name_the_row_each_target_row_copies_and_refuse_a_row_in_no_table():
    table = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)
    assert weight_swap.gathered_rows(table, table[[2, 0, 2]].reshape(1, 3, 2)) == (2, 0, 2)
    assert weight_swap.gathered_rows(table, np.array([[3.0, 4.0], [3.0, 4.5]], dtype=np.float32)) is None


def test_the_folding_rules_refuse_what_does_not_fit():
    assert weight_swap.broadcast_of(torch.ones(2, 3), (3, 2)) is None
    assert weight_swap.heads_layout(np.zeros((2, 3, 8), np.float32), (2, 3, 2, 5)) is None
    table, weight = np.ones((3, 8), np.float32), np.ones((8, 8), np.float32)
    assert weight_swap.projected_rows(table, weight, None, (2, 4, 8)) is None  # 4 rows asked, the table has 3
    assert weight_swap.projected_rows(table, np.ones((8, 6), np.float32), None, (2, 3, 8)) is None  # 6 inputs
