// Broken: does not compile. The missing header is first: GCC stops at once instead of parsing torch's headers.
#include "no_such_header.h"
#include <torch/extension.h>
int decode(  { return 0; }
