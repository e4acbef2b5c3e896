// Cheat (the build step): a global constructor runs when cpp_extension loads the built library in the judge's
// build child. There it looks for the judge's secrets (its environment, the data folder, the repository), tries
// the judge's resource limits (set to what they are: harmless where allowed), leaves a System V segment and a
// helper running, and writes what it found into the build folder (which it may write).
#include <Python.h>   // no torch headers: a build of seconds
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <dlfcn.h>
#include <cstring>
#include <sys/resource.h>
#include <sys/shm.h>

#define MARK_KEY 0x57414E42   // the segment the test looks for in the host's IPC namespace

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
        struct rlimit lim;                   // the judge's own limit, read and written back unchanged
        bool limits = prlimit(getppid(), RLIMIT_CPU, nullptr, &lim) == 0 &&
                      prlimit(getppid(), RLIMIT_CPU, &lim, nullptr) == 0;
        std::fprintf(f, "judge-limits %s\n", limits ? "changed" : "refused");
        int shm = shmget(MARK_KEY, 4096, IPC_CREAT | 0666);
        if (shm >= 0) {
            void* at = shmat(shm, nullptr, 0);
            if (at != (void*)-1) { std::strcpy((char*)at, "left by the build"); shmdt(at); }
        }
        std::fprintf(f, "sysv %s\n", shm >= 0 ? "made" : "refused");
        FILE* st = std::fopen("/proc/self/status", "r");   // CapEff and Seccomp, as the kernel sees them
        char line[256];
        while (st && std::fgets(line, sizeof line, st)) {
            if (!std::strncmp(line, "CapEff:", 7)) std::fprintf(f, "capabilities %s", line + 8);
            if (!std::strncmp(line, "Seccomp:", 8)) std::fprintf(f, "seccomp %s", line + 9);
        }
        if (st) std::fclose(st);
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
