// Cheat (the build step): a global constructor runs when cpp_extension loads the built library in the judge's
// build child. There it looks for the judge's secrets (its environment, the data folder, the repository) and
// leaves a helper running, and writes what it found into the build folder (which it may write).
#include <Python.h>   // no torch headers: a build of seconds
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <dlfcn.h>

static void look(FILE* f, const char* what, const char* path) {
    FILE* g = std::fopen(path, "r");
    std::fprintf(f, "%s %s\n", what, g ? "read" : "denied");
    if (g) std::fclose(g);
}

struct Escape {
    Escape() {
        if (std::getenv("RANK")) return;  // a rank: only the build child is of interest
        Dl_info info;                        // the built library's folder: the build folder, which it may write
        if (!dladdr((void*)&look, &info) || !info.dli_fname) return;
        std::string out(info.dli_fname);
        out = out.substr(0, out.rfind('/')) + "/escape.txt";
        FILE* f = std::fopen(out.c_str(), "w");
        if (!f) return;
        const char* mark = std::getenv("WAN_JUDGE_MARK");
        const char* data = std::getenv("DATA");
        std::fprintf(f, "mark %s\ndata-env %s\n", mark ? "seen" : "none", data ? "seen" : "none");
        char judge[64];
        std::snprintf(judge, sizeof judge, "/proc/%d/environ", (int)getppid());
        look(f, "judge-environ", judge);
        std::string root(__FILE__);          // .../tests/cheats/escapes_at_build/escape.cpp
        root = root.substr(0, root.rfind("/tests/cheats/"));
        look(f, "repository", (root + "/spec.py").c_str());
        std::fclose(f);
        if (fork() == 0) {        // a helper that means to outlive the build
            setsid();
            execl("/bin/sleep", "sleep", "299", (char*)nullptr);
            _exit(0);
        }
    }
} escape;

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "wan_escape_ext", nullptr, -1, nullptr};
PyMODINIT_FUNC PyInit_wan_escape_ext() { return PyModule_Create(&module); }
