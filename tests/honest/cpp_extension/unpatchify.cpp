// Unpatchify and clamp the decoder's output into the video, with ATen ops (so on CPU and CUDA tensors alike).
#include <torch/extension.h>

// y: the decoder's output (B, 12, n, h, w) for one latent frame; writes video frames [first, first + n) of out
// (B, 3, F, 2h, 2w): video[b, k, f, 2y + i, 2x + j] = y[b, 4k + 2j + i, f, y, x], clamped to [-1, 1].
void unpatchify_into(torch::Tensor out, const torch::Tensor& y, int64_t first) {
    TORCH_CHECK(y.dim() == 5 && y.size(1) % 4 == 0, "y: expected (B, 4C, n, h, w)");
    TORCH_CHECK(out.dim() == 5 && out.device() == y.device(), "out: expected a 5-d tensor on y's device");
    const int64_t b = y.size(0), c = y.size(1) / 4, n = y.size(2), h = y.size(3), w = y.size(4);
    auto video = y.view({b, c, 2, 2, n, h, w})          // (B, C, j, i, f, h, w)
                     .permute({0, 1, 4, 5, 3, 6, 2})    // (B, C, f, h, i, w, j)
                     .reshape({b, c, n, 2 * h, 2 * w})
                     .clamp(-1.0, 1.0);
    out.narrow(2, first, n).copy_(video);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("unpatchify_into", &unpatchify_into, "unpatchify + clamp one chunk of decoder output into out");
}
