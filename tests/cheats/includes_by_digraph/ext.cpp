#include <Python.h>
%:include "notes.txt"
static PyObject* flavour(PyObject*, PyObject*) { return PyUnicode_FromString(FLAVOUR); }
static PyMethodDef methods[] = {{"flavour", flavour, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "wan_digraph_ext", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_wan_digraph_ext() { return PyModule_Create(&module); }
