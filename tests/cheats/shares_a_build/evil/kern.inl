// Cheat (the build cache): this file alone tells the twin from its honest twin (../honest). Its int8 codes are what
// the audit finds; a build cache keyed by the sources it knows (kern.inl is none) would run this build for either
// twin, so the gate could certify the honest twin's audit while running this.
#include <stdint.h>
static inline int8_t code_of(float x) { return (int8_t)x; }
#define FLAVOUR "int8 codes"
