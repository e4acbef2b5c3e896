"""Cheat (16-bit sums past the dot rule): a Triton matmul whose K loop keeps each tl.dot in fp32 but carries the
running sum in fp16 through a temporary (`t = acc + tl.dot(a, b)`; `acc = t.to(tl.float16)`), and a matrix-vector
kernel that sums in fp16 with no dot at all. A sum carried across a kernel's loop in 16 bits is a finding, wherever
its dtype was set."""
import triton
import triton.language as tl

import reference


@triton.jit
def through_a_temporary(a_ptr, b_ptr, c_ptr, K, B: tl.constexpr):
    r = tl.arange(0, B)
    acc = tl.zeros((B, B), dtype=tl.float32)
    for k in range(0, K, B):
        a = tl.load(a_ptr + r[:, None] * K + (k + r)[None, :])
        b = tl.load(b_ptr + (k + r)[:, None] * B + r[None, :])
        t = acc + tl.dot(a, b)
        acc = t.to(tl.float16)
    tl.store(c_ptr + r[:, None] * B + r[None, :], acc)


@triton.jit
def without_a_dot(x_ptr, w_ptr, y_ptr, K, B: tl.constexpr):
    r = tl.arange(0, B)
    acc = tl.zeros((B,), dtype=tl.float16)
    for k in range(0, K, B):
        w = tl.load(w_ptr + r[:, None] * K + (k + r)[None, :])
        acc += tl.sum(tl.load(x_ptr + k + r)[None, :] * w, 1).to(tl.float16)
    tl.store(y_ptr + r, acc)


def run(z, weights, rank, world, pg, out):
    reference.run(z, weights, rank, world, pg, out)
