"""Honest pattern: CUDA graphs. The decoder's step on one latent frame (reference.decoder with its causal caches) is
captured once per input shape and replayed for every latent frame after the second; the graphs are kept in a
module-level dict keyed by the latent frame's shape, device and weights, and reused by later calls.

The first two latent frames run eagerly (the first has its own code path, the second grows the caches from one frame
to two); from the third on, every frame sees the same shapes. The graph reads a static input frame and static
caches, writes a static output, and copies the new caches over the old ones as its last step, so replaying it
advances the decode by one frame. Each call loads its own caches into the graph before the first replay.

Without CUDA it decodes eagerly, frame by frame.
"""
import torch

import reference

_GRAPHS = {}


class FrameGraph:
    """reference.decoder on one latent frame with two-frame caches, captured as a CUDA graph."""

    def __init__(self, W, geometry, frame, caches):
        self.W, self.geometry = W, geometry
        self.x = frame.clone()
        self.caches = {name: cache.clone() for name, cache in caches.items()}
        # Warm up on a side stream before capturing (this step's result and caches are overwritten by the first load).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.y = self.step()

    def step(self):
        caches = dict(self.caches)
        y = reference.decoder(self.x, self.W, caches, False, self.geometry)
        for name, new in caches.items():
            self.caches[name].copy_(new)
        return y

    def load(self, caches):
        for name, cache in caches.items():
            self.caches[name].copy_(cache)

    def __call__(self, frame):
        self.x.copy_(frame)
        self.graph.replay()
        return self.y


def write(out, y, first):
    out[:, :, first:first + y.shape[2]] = reference.unpatchify(y).clamp(-1.0, 1.0)


@torch.inference_mode()
def run(z, weights, rank, world, pg, out):
    if rank != 0:
        return
    W, g = reference.named_weights(weights, z)
    x, _ = reference.causal_conv3d(z, W["post_quant_conv.weight"], W["post_quant_conv.bias"], None)
    caches, done = {}, 0
    eager = z.shape[2] if z.device.type != "cuda" else min(2, z.shape[2])
    for i in range(eager):
        y = reference.decoder(x[:, :, i:i + 1], W, caches, i == 0, g)
        write(out, y, done)
        done += y.shape[2]
    if eager == z.shape[2]:
        return
    key = (tuple(x[:, :, :1].shape), z.device, tuple(w.data_ptr() for w in weights))
    if key not in _GRAPHS:
        _GRAPHS[key] = FrameGraph(W, g, x[:, :, 2:3], caches)
    graph = _GRAPHS[key]
    graph.load(caches)
    for i in range(eager, z.shape[2]):
        y = graph(x[:, :, i:i + 1])
        write(out, y, done)
        done += y.shape[2]
