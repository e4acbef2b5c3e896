"""The decode split over ranks by bands of rows.

Every rank decodes the same frames but only its band of latent rows, and the matching band at every level (x2, x4,
x8 rows). A spatial conv needs one row from each neighbour: its input buffer has a halo row above and below the
band, filled here (zeros at the image's top and bottom, which is the convolution's zero padding), and the conv then
pads only the columns. The causal cache keeps the haloed frames, so time needs no communication. Norms, SiLU, the
time convs, the 1x1 convs and the DupUp shortcut are per position; the mid block's attention gathers every rank's
keys and values; rank 0 gathers the video bands. Same arithmetic as on one GPU, other shapes: equal within rounding.
"""
import torch
import torch.distributed as dist

import spec


class Band:
    """This rank's rows of the latent grid (spec.bands: equal bands): `rows` of them from `first`."""

    def __init__(self, rank, world, pg, rows):
        self.rank, self.world, self.pg = rank, world, pg
        self.first, end = spec.bands(world, rows)[rank]
        self.rows = end - self.first

    def fill_halo(self, x):
        """x (..., h + 2, W): rows 1..h are this band; row 0 becomes the last row of the band above, row h + 1 the
        first row of the band below (zeros at the image's edges)."""
        top, bottom = x[..., 0, :], x[..., -1, :]
        recv, ops = [], []
        for peer, mine, halo in ((self.rank - 1, x[..., 1, :], top), (self.rank + 1, x[..., -2, :], bottom)):
            if 0 <= peer < self.world:
                buf = torch.empty(halo.shape, dtype=x.dtype, device=x.device)
                ops += [dist.P2POp(dist.isend, mine.contiguous(), peer, self.pg),
                        dist.P2POp(dist.irecv, buf, peer, self.pg)]
                recv.append((halo, buf))
            else:
                halo.zero_()
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        for halo, buf in recv:
            halo.copy_(buf)

    def haloed(self, x):
        """(N, C, h, W) channels-last -> (N, C, h + 2, W) with the neighbours' rows."""
        n, c, h, w = x.shape
        out = torch.empty((n, c, h + 2, w), dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
        out[:, :, 1:h + 1].copy_(x)
        self.fill_halo(out)
        return out

    def gather_rows(self, x, dim):
        """Every rank's x concatenated along `dim` (rows), in rank order, on every rank."""
        parts = [torch.empty_like(x) for _ in range(self.world)]
        dist.all_gather(parts, x.contiguous(), group=self.pg)
        return torch.cat(parts, dim)

    def gather_video(self, video, out):
        """Every rank's video band (B, 3, n, rows, W) into rank 0's `out` (B, 3, n, world * rows, W)."""
        parts = [torch.empty_like(video) for _ in range(self.world)] if self.rank == 0 else None
        dist.gather(video, parts, dst=0, group=self.pg)
        if self.rank == 0:
            r = video.shape[3]
            for k, part in enumerate(parts):
                out[:, :, :, k * r:(k + 1) * r].copy_(part)
