"""The regular expressions of audit.py's rules that are more than a list of names: calls of C functions by any
form, number formats narrower than bf16 and 8-bit dtypes by any spelling, rounding to integers, torch's private
dispatcher switches. harness/audit/rules.py's table uses them; the checks read them from there."""
import re


def calls(names):
    """A regex for calls of C functions: bare, `::name(` or `std::name(`; not `obj.name(`, `p->name(`, `ns::name(`.
    Also the function named as a value, which calls it under another name: its address (`&fork`), an argument,
    initialiser, template argument, operand or return value (`auto f = fork;`, `opener<open>`, `+read`, `{fork}`), a using-declaration (`using ::execv;`), a macro or -D value
    (`#define OPEN open`, `-DOPEN=open`)."""
    bare = r"(?:(?<![\w:])(?:std\s*)?::\s*|(?<![\w.>:]))"
    return (rf"{bare}(?:{names})\s*\(|(?:[&=(,<{{+*?:!|-]|\breturn\b)\s*{bare}(?:{names})\s*(?=[;,)>}}:?]|$)|"
            rf"&\s*{bare}(?:{names})\b|\busing\s+(?:std\s*)?::\s*(?:{names})\b|"
            rf"(?:#[ \t]*define[ \t]+\w+(?:\([^)\n]*\))?[ \t]+|-D\w+=)(?:std\s*)?(?:::\s*)?(?:{names})\b")


# Narrow formats. In Python identifiers `float4` is a dtype; in C++ it is CUDA's 4-vector, so the text pattern
# (also used for Python strings, which may hold CUDA source) names the formats by their exponent/mantissa split.
_NARROW_COMMON = (r"e4m3|e5m2|e2m1|e3m2|e2m3|e8m0|nvfp4|nvf4|mxfp|mxf[468]|f8f6f4|scaled_(grouped_)?mm|_int_mm|dot_scaled|"
                  r"int[48]pack_mm|quantize_per_")
NARROW_PY = re.compile(r"(?i)(float8|fp8|float6|fp6|float4|fp4)(?!\d)|(?<![a-z0-9])q(u)?int\d|"
                       r"(?<![a-z0-9])u?int[2-8](?!\d)|quantize|fake_quant|(char|byte)(tensor|storage)|"
                       r"(float|double|half|bfloat16)2u?(int|ll|short|char)_r[nzdu]|" + _NARROW_COMMON)
NARROW_TEXT = re.compile(r"(?i)(fp8|fp6|fp4|float8)(?!\d)|(?<![a-z0-9])u?int8_t\b|__nv_fp|dp4a|dp2a|\.[su][48]\.[su][48]|\.b1\.b1|"
                         r"precision::(s4|u4|b1)|kind::i8|\bu?int[1-4]b_t\b|\bbin1_t\b|" + _NARROW_COMMON)
# The same in C/C++/CUDA text (harness/audit/cpp.py reads the arithmetic a regex cannot decide: floor/ceil with a scale,
# clamps to a narrow range, integer casts). Integer dtypes of 8 bits or fewer by any spelling: `kChar` after
# `using namespace torch`, `at::ScalarType::Byte`, `signed char`, CUDA's `char4`.
CPP_NARROW_DTYPES = re.compile(r"\b(at|torch|c10|ScalarType)\s*::\s*(Q?U?Int8|QInt32|Char|Byte|QU?Int4x2|QU?Int2x4|"
                               r"U?Int[1-7])\b|\bk(Q?U?Int8|QInt32|Char|Byte|QU?Int4x2|QU?Int2x4|U?Int[1-7])\b|"
                               r"\bq(u)?int(8|32|4x2|2x4)\b|\bsigned\s+char\b|\b(make_)?u?char[1-4]\b|"
                               # a type of one byte by GCC's machine mode; a ScalarType made from its number
                               r"\bmode\s*\(\s*(__)?QI(__)?\s*\)|\bu?int_(least|fast)8_t\b|__U?INT8_TYPE__|"
                               r"\bstd\s*::\s*byte\b|_BitInt\s*\(\s*[1-8]\s*\)|"
                               r"static_cast\s*<[^<>]*ScalarType\s*>\s*\(\s*[-+]?\d|\bScalarType\s*[({]\s*[-+]?\d|"
                               r"\(\s*(\w+\s*::\s*)*ScalarType\s*\)\s*\(?\s*[-+]?\d|"
                               # a value cast to a byte (not a pointer: `(char*)`, `static_cast<char*>`)
                               r"\(\s*((un)?signed\s+)?char\s*\)\s*[\w(]|static_cast\s*<\s*((un)?signed\s+)?char\s*>")
# Rounding to integers by any spelling, libtorch's as well as C's, CUDA's and x86's: the names nothing else uses
# wherever they appear (a pointer to one rounds too; `__builtin_` and `__nv_` spellings too), those a solution's own
# code may use for its own things (`round`, `trunc`, `remainder`) when called in any form (`round(`,
# `std::round(`, `torch::round(`, `x.round(`, `p->round_(`; not `single_round(`) or named through a scope
# (`&at::Tensor::round`, `using std::trunc`; not `std::chrono::round<ms>`), its address taken (`&round`) or given
# to a macro (`#define R round`, `-DR=round`).
_ROUND_NAMES = (r"l?l?rint[fl]?|nearbyint[fl]?|roundeven[fl]?|l?l?round[fl]|l{1,2}round|frexp[fl]?|ldexp[fl]?|trunc[fl]|modf[fl]?|"
                r"fmod[fl]?|remainder[fl]|remquo[fl]?|h2?rint|h2?trunc|floor_divide_?|bucketize|searchsorted|"
                r"special_round|__(float|half|bfloat16|double)2u?(int|ll|short|char)_r[nzdu]")
_ROUND_CALLED = r"round_?|rint_|trunc_?|remainder_?|fmod_|ldexp_"
CPP_ROUNDING = re.compile(rf"(?<![A-Za-z0-9$])({_ROUND_NAMES})\b|(?<![\w$])(__builtin_|__nv_)?({_ROUND_CALLED})\s*\(|"
                          rf"::\s*({_ROUND_CALLED})\b(?!\s*<)|(\.|->|::)\s*(frac|fix)_?\s*\(|\bcvt\.r[nzmp]i\b|"
                          r"\b_mm\d*_(round|roundscale|cvtt?\w*_epi(8|16|32|64))\w*|"
                          rf"(&\s*|(#[ \t]*define[ \t]+\w+(\([^)\n]*\))?|-D\s*\w+(\([^)\n]*\))?=)[^\n]*?(?<![\w$.>:]))"
                          rf"({_ROUND_CALLED}|frac_?|fix_?)\b")
# torch's private switches of the dispatcher and of function/dispatch modes, on any object.
ATTR_PATTERN = re.compile(r"^_(dispatch_|set_torch_function|set_torch_dispatch|push_on_torch|pop_torch|"
                          r"enable_torch|disable_torch|python_dispatch)")
