// The honest twin's kern.inl: the weights as given.
#define FLAVOUR "as given"
