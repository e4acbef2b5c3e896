"""harness/rank/census.py: the precision census of prepare()'s tensors, judged as stored."""
import pytest
import torch

import spec
from harness.rank import census


@pytest.fixture
def strict(monkeypatch):
    """No bytes of grid allowed: these tests judge the rows, with tensors smaller than UNJUDGED_BYTES."""
    monkeypatch.setattr(census, "UNJUDGED_BYTES", 0)


def grids(found):
    """The per-tensor lines after the census's line on the bytes in all."""
    assert not found or "more than the" in found[0], found
    return found[1:]


def _weight(rows=64, cols=1024, seed=0):
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)).mul(0.02).to(torch.bfloat16)


def _int8_grid(w):
    scale = w.float().abs().amax(dim=1, keepdim=True) / 127
    return ((w.float() / scale).round() * scale).to(torch.bfloat16)


def _uniform(rows, cols, seed=1):
    return (torch.rand(rows, cols, generator=torch.Generator().manual_seed(seed)) * 0.04 - 0.02).to(torch.bfloat16)


def test_bf16_weights_pass_and_their_int8_grid_does_not(strict):
    """Gaussian and uniform bf16 weights (rows of the shortest judged length, where few values repeat most) pass;
    the same weights on a per-channel int8 grid fail, also with the channels stored last, and so does a grid padded
    with distinct junk columns that run() could slice off (its 256 most frequent values still make up 93% of a
    row)."""
    w = _weight()
    assert census.narrow([w, _uniform(64, census.MIN_ROW), _weight(cols=27648)]) == []
    found = census.narrow([w, _int8_grid(w)])
    assert grids(found) == ["tensor 1 [64, 1024]: 64 of its 64 slices along axis 0 (1024 elements each) are 90% or "
                            "more made of 256 values (an 8-bit grid)"], found
    junk = torch.linspace(1, 2, 80).to(torch.bfloat16).expand(64, 80)
    assert len(grids(census.narrow([torch.cat([_int8_grid(w), junk], 1)]))) == 1
    assert grids(census.narrow([_int8_grid(w).t().contiguous()]))[0].startswith("tensor 0 [1024, 64]: 64 of its 64 "
                                                                                "slices along axis 1")


def test_norm_gains_pass_in_any_dtype():
    """Gains near 1 (where bf16 holds about 40 values within 10%) of shape (C, 1, 1, 1), copied or made fp32 by
    prepare, are no grid."""
    gamma = (1 + 0.1 * torch.randn(1024, 1, 1, 1, generator=torch.Generator().manual_seed(4))).to(torch.bfloat16)
    assert census.narrow([gamma.clone(), gamma.float(), gamma.view(1024, 1, 1).float()]) == []


def test_dead_channels_pass_and_a_few_grid_rows_among_many_do_too(strict):
    """A constant row (a dead channel, zero padding) holds no grid, and up to 5% of the other rows may look like
    one; more fail."""
    w = _weight(rows=100)
    w[:30] = 0
    assert census.narrow([w]) == []
    w[30:33] = _int8_grid(w[30:33].clone())
    assert census.narrow([w]) == []
    w[33:35] = _int8_grid(w[33:35].clone())
    assert len(grids(census.narrow([w]))) == 1


def test_every_row_is_judged(strict):
    """No sample of rows: a grid in every row but a few fails."""
    w = _int8_grid(_weight(rows=512))
    w[::8] = _weight(rows=64, seed=3)
    assert len(grids(census.narrow([w]))) == 1


def test_a_stand_in_passes_only_over_one_stored_value():
    """spec.stand_in stores one element; a broadcast view over a whole stored grid is no stand-in."""
    q = _int8_grid(_weight())
    assert spec.is_stand_in(spec.stand_in(q)) and census.narrow([spec.stand_in(q)]) == []
    over_grid = q.as_strided(q.shape, (0, 0))
    assert census.narrow([over_grid]) == ["tensor 0 is a stand-in over a storage of 65536 elements (a stand-in "
                                          "stores one)"]


def test_a_view_must_span_its_storage_unless_it_is_the_judges():
    """A clean view beside a hidden grid in the same storage fails; views of the judge's weights pass."""
    w = _weight()
    both = torch.cat([w.reshape(-1), _int8_grid(w).reshape(-1)])
    head = both[:w.numel()].view(w.shape)
    assert census.narrow([head]) == ["tensor 0 [64, 1024] does not span its storage of 131072 elements exactly (a "
                                     "view: clone it)"]
    assert census.narrow([head.clone()]) == []
    assert census.narrow([head], lent=(both.data_ptr(), both.nbytes)) == []
    # A storage that starts at the judge's weights but reaches past them: only elements inside them pass.
    tail = both[w.numel():].view(w.shape)
    assert census.narrow([head, tail], lent=(both.data_ptr(), w.nbytes)) == [
        "tensor 1 [64, 1024] does not span its storage of 131072 elements exactly (a view: clone it)"]
    assert census.narrow([w.t(), w.contiguous(memory_format=torch.contiguous_format).view(64, 32, 32)[:, 1:]])[0] \
        .startswith("tensor 1 [64, 31, 32] does not span")


class _Hidden(torch.Tensor):
    def untyped_storage(self):
        return torch.UntypedStorage(0)


class _Raises(torch.Tensor):
    def untyped_storage(self):
        raise SystemExit(0)


def test_what_the_census_cannot_judge_fails_the_solution():
    """A subclass (its methods are the solution's: it could report an empty storage, or exit), a tensor without
    dense real data, and a view that repeats a few stored values over a huge shape (judging it would exhaust
    memory) each fail with a reason, never an exception out of the census."""
    q = _int8_grid(_weight())
    cases = {
        "is a _Hidden, not a plain tensor": q.as_subclass(_Hidden),
        "is a _Raises, not a plain tensor": q.as_subclass(_Raises),
        "is not a dense real tensor with data (torch.sparse_coo": q.to_sparse(),
        "is not a dense real tensor with data (torch.strided, torch.float32, meta)": torch.empty(64, 1024,
                                                                                                 device="meta"),
        "is not a dense real tensor with data (torch.strided, torch.complex64": torch.complex(q.float(), q.float()),
        "[65536, 65536, 512] does not span its storage of 512 elements":
            torch.zeros(512, dtype=torch.bfloat16).expand(2 ** 16, 2 ** 16, 512),
    }
    for i, (why, t) in enumerate(cases.items()):
        found = census.narrow([_weight()] * i + [t])
        assert len(found) == 1 and found[0].startswith(f"tensor {i} {why}"), found


def test_parameters_and_empty_tensors_are_judged_as_tensors(strict):
    assert census.narrow([torch.nn.Parameter(_weight(), requires_grad=False), torch.empty(0, 600)]) == []
    assert len(grids(census.narrow([torch.nn.Parameter(_int8_grid(_weight()), requires_grad=False)]))) == 1


def test_a_grid_reshaped_flattened_or_as_integers_is_counted():
    """A per-channel grid flattened to 1-D, or reshaped so that no slice or row stays within a channel, is judged by
    its runs as stored; one reinterpreted as int16 is counted as integer; in all they hold more than the allowance.
    The same weights as bf16 pass flattened and reshaped."""
    w = _weight(rows=1024)                                           # 2 MiB of bf16, 4 rows of the allowance
    q = _int8_grid(w)
    assert census.narrow([w.reshape(-1), w.reshape(-1)[:1024 * 1022].reshape(-1, 7).clone()]) == []
    flat = census.narrow([q.reshape(-1)])
    assert flat[0].startswith("2097152 bytes in 1 tensors are integer, too small to judge or on an 8-bit grid, more "
                              f"than the {census.UNJUDGED_BYTES} allowed") and "runs as stored (512 elements each)" in flat[1], flat
    odd = census.narrow([q.reshape(-1)[:1024 * 1022].reshape(-1, 7).clone()])
    assert len(odd) == 2 and "runs as stored" in odd[1], odd
    bits = census.narrow([q.view(torch.int16)])
    assert bits == ["2097152 bytes in 1 tensors are integer, too small to judge or on an 8-bit grid, more than the "
                    f"{census.UNJUDGED_BYTES} allowed", "tensor 0 is int16 [1024, 1024]"], bits


def test_small_tensors_and_gains_count_within_the_allowance():
    """The given weights' tensors too small to hold a row, and norm gains near 1 (a grid of about 40 values), pass
    in fp32 too, all of the full geometry's at once; the same bytes of grid spread over tensors too small to judge
    fail. A few small integer tables pass."""
    small = [torch.randn(s, generator=torch.Generator().manual_seed(i)) * 0.02
             for i, (_, s) in enumerate(spec.weight_list(spec.FULL)) if torch.Size(s).numel() <= 4096]
    gains = [1 + 0.1 * torch.randn(1024, 1, 1, 1, generator=torch.Generator().manual_seed(7)) for _ in range(30)]
    tables = [torch.arange(4096, dtype=torch.int32)]
    assert census.narrow(small + gains + tables) == []
    pieces = [p.clone() for p in _int8_grid(_weight(rows=1024)).reshape(-1, 256).unbind(0)]
    found = census.narrow(pieces)
    assert found[0].endswith(f"more than the {census.UNJUDGED_BYTES} allowed") and "is too small to judge" in found[1]


def test_the_allowance_is_below_one_costly_weight_in_int4():
    """The full geometry's allowance holds fp32 copies of its vectors and small tensors, but not the smallest 3x3x3
    weight of the 352 x 624 level (up block 3's) as int4; the tiny geometry's is its own, smaller."""
    shapes = dict(spec.weight_list(spec.FULL))
    vectors = sum(torch.Size(s).numel() for s in shapes.values() if sum(n > 1 for n in s) <= 1 or
                  torch.Size(s).numel() < census.MIN_ROW)
    assert census.UNJUDGED_BYTES >= 4 * 2 * vectors      # bf16 given: room for fp32 copies twice over
    assert census.UNJUDGED_BYTES < torch.Size(shapes["decoder.up_blocks.3.resnets.1.conv1.weight"]).numel() // 2
    tiny = census.allowance([s for _, s in spec.weight_list(spec.TINY)])
    assert 0 < tiny < census.UNJUDGED_BYTES // 10
