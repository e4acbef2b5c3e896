"""The narrow-numerics rule's arithmetic, shared by its Python checks (harness/audit/numerics.py, python_rules.py) and
its C/C++ checks (harness/audit/cpp_numerics.py): the dtypes and casts, the rounding, scaling and clamping operations,
the clamp bounds of narrow formats and the constants that round when added and subtracted. The rule's regexes (narrow
formats by name, 8-bit dtypes, rounding in C++) are harness/audit/patterns.py's."""

# Dtypes no value may be cast to, the integer dtypes whose cast of a quotient rounds it, the rounding functions that
# snap to a grid when a scale is applied, and the clamp bounds of narrow formats (int8, uint8, int4, uint4, fp8 e4m3
# and e5m2, fp4 e2m1).
NARROW_DTYPES = ("torch.int8", "torch.uint8", "torch.qint8", "torch.quint8", "torch.qint32", "torch.quint4x2",
                 "torch.quint2x4", "triton.language.int8", "triton.language.uint8", "numpy.int8", "numpy.uint8",
                 "int8", "uint8")
INT_DTYPES = ("torch.int16", "torch.int32", "torch.int64", "torch.long", "torch.int", "torch.short", "torch.uint16",
              "torch.uint32", "torch.uint64",
              "triton.language.int16", "triton.language.int32", "triton.language.int64", "numpy.int16",
              "numpy.int32", "numpy.int64")
INT_CASTS = ("int", "long", "short")         # tensor methods
# Casts to these round a float tensor to integers whatever the expression: no index needs them (indices are int64).
ROUNDING_CASTS = ("torch.int16", "torch.int32", "torch.int", "torch.short", "triton.language.int16",
                  "triton.language.int32", "numpy.int16", "numpy.int32")
FLOORS = ("floor", "floor_", "ceil", "ceil_", "trunc", "trunc_", "fix", "fix_")
DIVIDES = ("div", "div_", "divide", "divide_", "true_divide", "true_divide_")
MULTIPLIES = ("mul", "mul_", "multiply", "multiply_")
CLAMPS = ("clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_")
NARROW_RANGES = ((-128, 127), (-127, 127), (0, 255), (-8, 7), (-7, 7), (0, 15), (-448, 448), (-57344, 57344),
                 (-6, 6))
NARROW_LIMITS = (127, 128, 255, 448, 57344)   # a lone clamp bound of these magnitudes names a narrow range too
# Added and subtracted again, these round an fp32 (2^23, 1.5 x 2^23) or fp64 (2^52, 1.5 x 2^52) to an integer:
# quantisation without a round() call.
ROUNDERS = (2.0 ** 23, 1.5 * 2 ** 23, 2.0 ** 52, 1.5 * 2 ** 52)
