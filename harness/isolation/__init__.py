"""The isolation of a solution's processes: Landlock, seccomp, cgroups, namespaces, users, caps on what they hold."""
