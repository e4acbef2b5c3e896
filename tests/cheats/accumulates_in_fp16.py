"""Cheat (narrow numerics in Triton): a GEMM kernel whose `tl.dot` accumulates into an fp16 accumulator given as its
third argument (`acc`), with no `out_dtype` in sight; the dot's result takes the accumulator's dtype. The audit traces
every accumulator given to `tl.dot` to the values its name gets (harness/audit/numerics._accumulates_in_fp32)."""
import triton
import triton.language as tl

import reference


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float16)
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * K + k + rows[None, :])
        b = tl.load(b_ptr + (k + rows[:, None]) * BLOCK + rows[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], acc)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
