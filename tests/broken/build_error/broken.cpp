// Broken: does not compile.
#include <torch/extension.h>
int decode(  { return 0; }
