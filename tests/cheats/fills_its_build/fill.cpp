// Cheat (the build step's disk): a global constructor, run each time the judge's build child loads the library (a
// fresh build, or the cached one on every later run), adds 3 MiB to the build folder, which outlives the run, and
// writes 3 MiB to its output, which the judge keeps, so that the cache and the judge's files grow run after run.
#include <Python.h>   // no torch headers: a build of seconds
#include <cstdio>
#include <cstdlib>
#include <string>
#include <dlfcn.h>

static void fill(FILE* f, size_t bytes) {
    std::string chunk(1 << 16, 'a');
    for (size_t n = 0; n < bytes; n += chunk.size()) std::fwrite(chunk.data(), 1, chunk.size(), f);
}

struct Fill {
    Fill() {
        if (std::getenv("RANK")) return;     // the build child only
        Dl_info info;
        if (!dladdr((void*)&fill, &info) || !info.dli_fname) return;
        std::string path(info.dli_fname);
        path = path.substr(0, path.rfind('/')) + "/fill-" + std::to_string(rand()) + ".bin";
        FILE* f = std::fopen(path.c_str(), "w");
        if (f) { fill(f, 3 << 20); std::fclose(f); }
        fill(stdout, 3 << 20);
        std::fflush(stdout);
    }
} filler;

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "wan_fill_ext", nullptr, -1, nullptr};
PyMODINIT_FUNC PyInit_wan_fill_ext() { return PyModule_Create(&module); }
