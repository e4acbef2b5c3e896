// Cheat (narrow numerics, in C++): a conv weight snapped to a per-output-channel int8 grid through libtorch's tensor
// API, the method forms of Python's `(w / s).round().clamp(-127, 127) * s`, then back to bf16.
#include <vector>

inline torch::Tensor shape_weight(const torch::Tensor& w) {
    auto f = w.to(torch::kFloat);
    std::vector<int64_t> dims;
    for (int64_t d = 1; d < f.dim(); ++d) dims.push_back(d);
    auto scale = f.abs().amax(dims, /*keepdim=*/true).clamp_min(1e-12) / 127.0;
    return f.div(scale).round().clamp(-127, 127).mul(scale).to(torch::kBFloat16);
}
