"""harness/census.py: the precision census of prepare()'s tensors, judged by what each tensor stores."""
import torch

from harness import census


def _weight(rows=64, cols=1024, seed=0):
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def _int8_grid(w):
    scale = w.float().abs().amax(dim=1, keepdim=True) / 127
    return ((w.float() / scale).round() * scale).to(torch.bfloat16)


def test_a_bf16_weight_passes_and_its_int8_grid_does_not():
    w = _weight()
    assert census.narrow([w]) == []
    found = census.narrow([w, _int8_grid(w)])
    assert len(found) == 1 and found[0].startswith("tensor 1 [64, 1024]: a median output channel"), found


def test_a_stand_in_that_stores_one_value_passes():
    """A broadcast scalar in a weight's shape (what a solution leaves where it reads the weight in another form)
    stores no weight, so it is not judged, though each of its rows holds one distinct value."""
    stand_in = torch.zeros((), dtype=torch.bfloat16).expand(1024, 48, 3, 3, 3)
    assert census.narrow([stand_in]) == []


def test_a_broadcast_view_of_a_narrow_weight_is_judged_by_its_storage():
    """A view whose strides repeat one row of a stored int8-grid weight is judged, as the weight would be."""
    q = _int8_grid(_weight(rows=4096))
    view = q[:1].expand(1024, -1)
    assert len(census.narrow([view])) == 1


class _Hidden(torch.Tensor):
    def untyped_storage(self):
        return torch.UntypedStorage(0)


class _Raises(torch.Tensor):
    def untyped_storage(self):
        raise RuntimeError("no storage here")


def test_what_the_census_cannot_judge_fails_the_solution():
    """A subclass (its methods are the solution's: it could report an empty storage), a tensor without dense data,
    and a view that repeats a few stored values over a huge shape (judging it would exhaust memory) each fail with
    a reason, never an exception out of the census."""
    q = _int8_grid(_weight())
    cases = {
        "is a _Hidden, not a plain tensor": q.as_subclass(_Hidden),
        "is a _Raises, not a plain tensor": q.as_subclass(_Raises),
        "is not a dense tensor with data (torch.sparse_coo": q.to_sparse(),
        "is not a dense tensor with data (torch.strided, meta)": torch.empty(64, 1024, device="meta"),
        "[65536, 65536, 512] repeats the 512 elements its storage holds":
            torch.zeros(512, dtype=torch.bfloat16).expand(2 ** 16, 2 ** 16, 512),
    }
    for i, (why, t) in enumerate(cases.items()):
        found = census.narrow([_weight()] * i + [t])
        assert found == [f"tensor {i} {why}"] or (len(found) == 1 and found[0].startswith(f"tensor {i} {why}")), found


def test_a_parameter_is_judged_as_a_tensor():
    assert census.narrow([torch.nn.Parameter(_weight(), requires_grad=False)]) == []
    assert len(census.narrow([torch.nn.Parameter(_int8_grid(_weight()), requires_grad=False)])) == 1
