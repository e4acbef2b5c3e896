// Both twins' extension, the same file in each: its one function comes from kern.inl, the file that tells them apart.
#include <Python.h>   // no torch headers: a build of seconds
#include "kern.inl"

static PyObject* flavour(PyObject*, PyObject*) { return PyUnicode_FromString(FLAVOUR); }
static PyMethodDef methods[] = {{"flavour", flavour, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "wan_twin_ext", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_wan_twin_ext() { return PyModule_Create(&module); }
