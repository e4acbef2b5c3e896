"""The index of the tests' fixtures: one entry per solution in tests/cheats/, tests/cheats_gpu/, tests/broken/,
tests/honest/ and tests/probes/ (each folder's direct children but README.md and names starting with '_' or '.'), and
solutions/diffusers, of the honest corpus. An entry says what the fixture is, the defence it pins or the pattern it
shows, and what bench, ci and the audit must report for it where a test reads that here; tests that hold a fixture to
assertions of their own are named in `see`. tests/test_fixtures.py keeps the index and the folders equal.

The tests parametrize from FIXTURES, each taking the entries it runs:
- tests/trust/test_trust.py: the cheats with a `bench` verdict, by its run (BESIDE, PROFILED, INPUTS), and their
  `ci_runtime` verdicts (the gate with its audit off: the runtime layer alone);
- tests/judge/test_ci.py: the cheats with a `ci` verdict (the gate with its audit): failures by their exit code and
  check, and the audit's review notes, on which the gate passes (exit 0);
- tests/audit/test_audit.py: each cheat's `audit` rules, each of which must fire;
- tests/judge/test_bench.py: the broken solutions' `bench` verdicts (run ALONE);
- tests/trust/test_honest.py and tests/gpu/test_gpu.py: the honest corpus (the honest entries with `audit` notes);
- tests/gpu/test_gpu_cheats.py: the BESIDE, PROFILED and INPUTS cheats on a GPU, where `gpu` overrides `bench`.
"""
import os
from typing import NamedTuple

from harness.isolation import users

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
FOLDERS = ("tests/cheats", "tests/cheats_gpu", "tests/broken", "tests/honest", "tests/probes")

# kind: what the fixture is
CHEAT = "cheat"         # a hostile solution: the harness must fail it, for its reason
BROKEN = "broken"       # an honest-looking solution that fails: bench must say how
HONEST = "honest"       # a correct solution: bench and the gate must pass it
PROBE = "probe"         # not a solution to time: it checks its own rank's confinement and fails where it is loose
# layer: what the tests hold it to
RUNTIME = "runtime"     # the judge's checks as it runs (bench, which has no audit; ci --no-audit)
AUDIT = "audit"         # the static audit (audit.py, the gate's audit check) alone: the runtime checks pass it
BOTH = "both"           # the audit flags it and the runtime checks catch it (honest: both pass it)
# tier: where the index's runs of it go (the tests in `see` carry their own marks)
DEFAULT = "default"     # in the default tier's share too (test_trust's "some" run, test_ci's and test_bench's
#                         unmarked cases, test_honest's gate of the module tree)
SLOW = "slow"           # in the slow tier only
GPU = "gpu"             # on a GPU only (`-m gpu`)
# bench's runs of the index's verdicts
BESIDE = "beside"       # every such cheat in one run beside the reference, on f5x1 (and on a GPU, in batches)
PROFILED = "profiled"   # the same under --profile
INPUTS = "inputs"       # beside the reference on f5x1 and f121x1, no warm-up, two timed calls
ALONE = "alone"         # alone on its workload and f1x1, deadlines scaled down
CORPUS = "corpus"       # the honest corpus but the slow to build and diffusers, together (f5x1; slow: f121x4)

# Under a user of its own a rank cannot open its command pipe for writing (the judge's, mode 0600); as root it can,
# and the judge's deadline on its writes fails it (test_trust's test_a_full_command_pipe_cannot_hang_the_judge).
USERS = users.Users().why_not is None       # ranks under users of their own (harness/isolation/users.py)


class Bench(NamedTuple):
    """What bench reports: the workload's record's status and a phrase of its reason."""
    status: str
    phrase: str = ""
    workload: str = "f5x1"
    run: str = BESIDE


class Gate(NamedTuple):
    """What ci.py reports: its exit code; the failing check (None: the first that fails), its status and a phrase of
    its reason. Exit 0: no check fails, and the phrase is the console's ("review note": the audit's notes shown)."""
    code: int
    check: str | None
    status: str
    phrase: str


class Fixture(NamedTuple):
    path: str                       # from the repository's root
    kind: str
    layer: str
    pins: str                       # the defence it pins, the failure it shows, or the honest pattern
    bench: Bench | None = None
    gpu: Bench | None = None        # bench on a GPU, where it reports otherwise than `bench` says
    ci: Gate | None = None          # ci.py with its audit
    ci_runtime: Gate | None = None  # ci.py --no-audit
    audit: tuple | None = None      # a cheat: rules that must fire; honest: the review notes it raises, at least
    tier: str | None = None
    see: tuple = ()                 # tests with assertions of their own on it: "module::function"

    @property
    def name(self):
        """The file's or folder's name (bench and ci name the solution by it, less ".py")."""
        return os.path.basename(self.path)

    @property
    def file(self):
        return os.path.join(ROOT, self.path)


def _cheat(name, layer, pins, **kw):
    return Fixture("tests/cheats/" + name, CHEAT, layer, pins, **kw)


def _fails(status, phrase):
    """ci --no-audit's verdict on a cheat whose first failing check has bench's status and reason."""
    return Gate(1 if status in ("tampering", "input modified") else 2, None, status, phrase)


FIXTURES = [
    # ----- cheats bench fails beside the reference (one run of all; the default tier's run: three of them); the
    # gate's share, one per layer of the judge, with the audit off (ci_runtime) -----------------------------------
    _cheat("forges_lines.py", RUNTIME, "the protocol: a `done` and a `report` forged into the result pipe",
           bench=Bench("tampering", "does not answer this call's `go`"),
           ci_runtime=_fails("tampering", "does not answer this call's `go`"), tier=DEFAULT),
    _cheat("early_done.py", RUNTIME, "the clock: a `done` with the call's nonce before the work is done",
           bench=Bench("tampering", "out changed after done"),
           ci_runtime=_fails("tampering", "out changed after done"), tier=DEFAULT),
    _cheat("hooks_before_window.py", BOTH, "the clock's window: a hook that decodes where the judge touches z",
           bench=Bench("tampering", "replaced torch.Tensor.contiguous"), audit=("monkeypatch",), tier=SLOW),
    _cheat("hooks_after_window.py", RUNTIME, "the clock's window: a decode in hooks run when the judge reads out",
           bench=Bench("tampering", "elements not finite"), tier=SLOW),
    _cheat("reads_data_folder.py", RUNTIME, "the filesystem lock: the judge's data folder",
           bench=Bench("runtime error", "PermissionError"), ci_runtime=_fails("runtime error", "PermissionError"),
           tier=DEFAULT),
    _cheat("writes_repository.py", RUNTIME, "the filesystem lock: the repository is not the rank's to write",
           bench=Bench("runtime error", "PermissionError"), tier=SLOW),
    _cheat("tmp_cache.py", RUNTIME, "the filesystem lock: no cache in /tmp shared by groups and runs",
           bench=Bench("runtime error", "PermissionError"), tier=SLOW),
    _cheat("reads_reference.py", BOTH, "the decoys: a read of the stored references is seen",
           bench=Bench("tampering", "read the decoy references"),
           ci=Gate(3, "fresh latents #1 x1", "tampering", "read the decoy references"),
           ci_runtime=_fails("tampering", "read the decoy references"), tier=SLOW),
    _cheat("child_process.py", RUNTIME, "processes left running after the call",
           bench=Bench("tampering", "processes left running after the call"),
           ci=Gate(1, "f1x1", "tampering", "processes left running after the call"),
           ci_runtime=_fails("tampering", "processes left running after the call"), tier=SLOW),
    _cheat("spawns_in_prepare.py", RUNTIME, "processes left running after prepare",
           bench=Bench("tampering", "processes left running after prepare"), tier=SLOW),
    _cheat("detaches_quietly.py", RUNTIME, "a daemon (double fork, new session, no environment) is still the group's",
           bench=Bench("tampering", "processes left running after the call"), tier=SLOW),
    _cheat("forges_a_pass.py", RUNTIME, "the protocol: an `error` line whose status is 'passed'",
           bench=Bench("tampering", "reported the status 'passed'"),
           ci_runtime=_fails("tampering", "reported the status 'passed'"), tier=SLOW),
    _cheat("json_bomb.py", RUNTIME, "the protocol: a line nested too deep is malformed, not the judge's crash",
           bench=Bench("tampering", "sent a malformed line"), ci_runtime=_fails("tampering", "sent a malformed line"),
           tier=SLOW),
    _cheat("endless_line.py", RUNTIME, "the protocol: a bound on a line's length",
           bench=Bench("tampering", "sent a line of more than"), tier=SLOW),
    _cheat("truncates_out.py", RUNTIME, "out's memory file cannot be truncated under the judge (SIGBUS)",
           bench=Bench("runtime error", "PermissionError"), gpu=Bench("runtime error", "no descriptor of out found"),
           tier=SLOW),
    _cheat("leaves_its_cgroup.py", RUNTIME, "the filter: clone3 into another cgroup; the helper stays the group's",
           bench=Bench("tampering", "processes left running after the call"),
           ci_runtime=_fails("tampering", "processes left running after the call"), tier=SLOW),
    _cheat("floods_scratch.py", RUNTIME, "the disk cap on a group's scratch folders and logs",
           bench=Bench("tampering", "wrote more than 8 GiB to their scratch folders and logs"),
           ci_runtime=_fails("tampering", "wrote more than 8 GiB to their scratch folders and logs"), tier=SLOW),
    _cheat("holds_disk_in_no_folder.py", RUNTIME, "the disk count: files in no folder (O_TMPFILE, held open)",
           bench=Bench("tampering", "(files in no folder too)"), tier=SLOW),
    _cheat("floods_its_log.py", RUNTIME, "the cap on one file: the rank's log",
           bench=Bench("tampering", "wrote a file of more than 2 GiB (its log or in its scratch)"), tier=SLOW),
    _cheat("sparse_log.py", RUNTIME, "the cap on one file: a sparse log past a count of blocks",
           bench=Bench("tampering", "wrote a file of more than 2 GiB (its log or in its scratch)"), tier=SLOW),
    _cheat("stalls_the_judge.py", RUNTIME, "the protocol: a `done` of at most 256 bytes (a slow parse stops no clock)",
           bench=Bench("tampering", "bytes (at most 256)"), tier=SLOW),
    _cheat("stalls_its_report.py", RUNTIME, "the deadline on a call's `report` after its `done`",
           bench=Bench("timeout", "no 'report' line from rank 0 within 10.0 s"), tier=SLOW),
    _cheat("limits_the_judge.py", RUNTIME, "the filter: prlimit on the judge",
           bench=Bench("runtime error", "PermissionError"), tier=SLOW),
    _cheat("signals_the_judge.py", RUNTIME, "Landlock's signal scope: no signal to the judge, by pid or pidfd",
           bench=Bench("runtime error", "both signals to the judge refused"), tier=SLOW),
    _cheat("leases_a_shared_file.py", RUNTIME, "the filter: a lease on a file every rank opens",
           bench=Bench("runtime error", "PermissionError"), tier=SLOW),
    _cheat("spends_root_counts.py", RUNTIME, "the filter: root's per-user counts (pipe buffers, message queues)",
           bench=Bench("runtime error", "root's per-user counts refused: F_SETPIPE_SZ, mq_open"), tier=SLOW),
    _cheat("uses_io_uring.py", RUNTIME, "the filter: io_uring (operations no syscall filter sees)",
           bench=Bench("runtime error", "io_uring_setup refused: Function not implemented"),
           ci_runtime=_fails("runtime error", "io_uring_setup refused: Function not implemented"), tier=SLOW),
    _cheat("holds_host_counts.py", RUNTIME, "the cap on a group's sockets (the host's pools); AIO contexts refused",
           bench=Bench("tampering", "held more than 4096 sockets (tcp_mem is one pool for the whole host)"),
           tier=SLOW),
    _cheat("hides_sockets_in_a_backlog.py", RUNTIME, "the sockets of a group's network namespace, unaccepted ones too",
           bench=Bench("tampering", "held more than 4096 sockets in their network namespace"), tier=SLOW),
    _cheat("queues_in_netlink.py", RUNTIME, "the cap on bytes queued in a group's sockets (netlink)",
           bench=Bench("tampering", "the ranks' sockets queued more than 0.25 GiB"), tier=SLOW),
    _cheat("ends_its_first_thread.py", RUNTIME, "the counts read through a live thread (the first thread ended)",
           bench=Bench("tampering", "the ranks' sockets queued more than 0.25 GiB"),
           gpu=Bench("tampering", "the driver refused to hold its CUDA between calls"), tier=SLOW),
    _cheat("own_file_table.py", RUNTIME, "the filter: a file table of its own (unshare(CLONE_FILES))",
           bench=Bench("runtime error", "a file table of its own refused (Operation not permitted)"), tier=SLOW),
    _cheat("disarms_the_decoys.py", RUNTIME, "the filter: the decoys' access times cannot be stopped (noatime)",
           bench=Bench("runtime error", "noatime refused both ways"), tier=SLOW),
    _cheat("blames_the_harness.py", RUNTIME, "a rank's 'harness error' is the solution's runtime error",
           bench=Bench("runtime error", "(it reported a harness error in run): the harness broke, not me"),
           ci_runtime=_fails("runtime error", "(it reported a harness error in run): the harness broke, not me"),
           tier=SLOW),
    _cheat("fills_its_commands.py", RUNTIME,
           "the command pipe: no second write end under a user of its own; a deadline on the judge's writes",
           bench=Bench("runtime error", "no second write end of the command pipe") if USERS else
           Bench("tampering", "rank 0 did not read its commands for 5 s"), tier=SLOW,
           see=("test_trust::test_a_full_command_pipe_cannot_hang_the_judge",)),
    _cheat("closes_its_commands.py", RUNTIME, "a command pipe a rank closed is the solution's failure",
           bench=Bench("tampering", "rank 0 closed its command pipe"),
           ci_runtime=_fails("tampering", "rank 0 closed its command pipe"), tier=SLOW),
    _cheat("weights_tail.py", RUNTIME, "the lent weights' whole pages checked (a mark past their end)",
           bench=Bench("input modified", "the weights were modified by prepare"), gpu=Bench("crash", "rank 0 died"),
           ci_runtime=_fails("input modified", "the weights were modified by prepare"), tier=SLOW),

    # ----- cheats on --profile's traces and its profiled call ---------------------------------------------------------
    _cheat("trace_names_dev_zero.py", RUNTIME, "--profile: a trace copied from a regular file only (/dev/zero)",
           bench=Bench("tampering", "not a regular file", run=PROFILED), tier=SLOW),
    _cheat("trace_is_a_fifo.py", RUNTIME, "--profile: a trace copied from a regular file only (a FIFO)",
           bench=Bench("tampering", "not a regular file", run=PROFILED), tier=SLOW),
    _cheat("wrong_when_profiled.py", RUNTIME, "--profile: the profiled call is checked as every call is",
           bench=Bench("incorrect", "the profiled call: max|d|", run=PROFILED), tier=SLOW),
    _cheat("replays_when_profiled.py", RUNTIME, "--profile: the profiled call's latents are fresh (nothing to replay)",
           bench=Bench("incorrect", "the profiled call: max|d|", run=PROFILED), tier=SLOW),

    # ----- cheats on the inputs: replays (the roofline floor; repeats against fresh calls; second looks), a
    # prediction of the data, and the precision census of prepare's tensors at a group's start ---------------------
    _cheat("replays_module_cache.py", RUNTIME, "a replay from a module-level cache",
           bench=Bench("impossible", "below the roofline floor", "f121x1", INPUTS), tier=SLOW),
    _cheat("replays_default_arg.py", RUNTIME, "a replay from a mutable default argument",
           bench=Bench("impossible", "below the roofline floor", "f121x1", INPUTS), tier=SLOW),
    _cheat("replays_function_attribute.py", RUNTIME, "a replay from an attribute of run",
           bench=Bench("impossible", "below the roofline floor", "f121x1", INPUTS), tier=SLOW),
    _cheat("replays_slowly.py", RUNTIME, "a replay slowed above the roofline: repeats against fresh calls",
           bench=Bench("tampering", "faster on repeated inputs", "f121x1", INPUTS),
           ci_runtime=Gate(1, "f121x1 repeat", "tampering", "faster on repeated inputs"), tier=SLOW),
    _cheat("replays_from_prepared.py", RUNTIME, "a replay kept in tensors prepare returned",
           bench=Bench("tampering", "faster on repeated inputs", "f121x1", INPUTS), tier=SLOW),
    _cheat("skips_after_a_replay.py", RUNTIME, "the bar a replay is judged by: calls verified in full, a second look",
           bench=Bench("incorrect", "max|d|", "f121x1", INPUTS),      # its skipped second-look calls, in full
           ci_runtime=Gate(1, "f121x1 repeat", "tampering", "on a second look: max|d|"), tier=SLOW),
    _cheat("detects_gate.py", RUNTIME, "honest only where it sees the gate: bench's checks are the gate's",
           bench=Bench("impossible", "below the roofline floor", "f121x1", INPUTS), tier=SLOW),
    _cheat("replays_looks.py", RUNTIME, "replays past a second look: each look draws latents of its own",
           bench=Bench("tampering", "faster on repeated inputs", "f121x1", INPUTS),
           ci_runtime=Gate(1, "f5x1 repeat", "tampering", "faster on repeated inputs"), tier=SLOW),
    _cheat("predicts_data.py", RUNTIME, "the data predicted from the maker's seed: fresh latents",
           bench=Bench("incorrect", "max|d|", "f5x1", INPUTS),
           ci_runtime=Gate(1, "fresh latents #1 x1", "incorrect", "max|d|"), tier=SLOW),
    _cheat("int8_weights.py", RUNTIME, "the census: int8-grid weights from prepare",
           bench=Bench("incorrect", "narrow numerics", "f5x1", INPUTS), tier=SLOW),
    _cheat("subclass_weights.py", RUNTIME, "the census: plain tensors only (a subclass claiming no storage)",
           bench=Bench("incorrect", "is a Hidden, not a plain tensor", "f5x1", INPUTS), tier=SLOW),
    _cheat("storage_tail.py", RUNTIME, "the census: a tensor spans its storage (a grid in its tail)",
           bench=Bench("incorrect", "does not span its storage", "f5x1", INPUTS), tier=SLOW),
    _cheat("mode_in_census.py", RUNTIME, "the census: no dispatch mode left on after prepare",
           bench=Bench("tampering", "modes left on", "f5x1", INPUTS), tier=SLOW),
    _cheat("reaches_past_given.py", RUNTIME, "the census: a view of the judge's weights lies inside them",
           bench=Bench("incorrect", "does not span its storage", "f5x1", INPUTS), tier=SLOW),
    _cheat("channels_stored_last.py", RUNTIME, "the census: slices along every axis (output channels last)",
           bench=Bench("incorrect", "slices along axis 4", "f5x1", INPUTS), tier=SLOW),

    # ----- cheats the gate fails, with its audit, on f1x1 and f5x1 and fresh latents (the default tier's: one per kind
    # of check); reads_reference.py and child_process.py above ------------------------------------------------------
    _cheat("cache_by_shape.py", BOTH, "a video cached per shape: fresh latents; the audit's state rule",
           ci=Gate(1, "fresh latents #2 x1", "incorrect", "max|d|"), audit=("state",), tier=SLOW),
    _cheat("forges_the_console.py", RUNTIME, "the console: a solution's controls and lines never pass for the judge's",
           ci=Gate(2, "fresh latents #1 x1", "runtime error", "gave up??[2K?[1A?[32mPASS?[0m f1x1"), tier=SLOW,
           see=("test_bench::test_a_solutions_lines_never_start_where_the_judges_do",
                "test_ci::test_the_gate_on_a_narrow_terminal_prints_no_row_of_a_solution_where_its_own_start")),
    _cheat("grid_as_integers.py", RUNTIME, "the census: integer tensors (an int8 grid viewed as int16)",
           ci=Gate(1, "start x1", "incorrect", "is int16"), tier=SLOW),
    _cheat("grid_flattened.py", RUNTIME, "the census: runs of 512 elements as stored (a grid flattened to 1-D)",
           ci=Gate(1, "start x1", "incorrect", "runs as stored (512 elements each) are 90% or more"), tier=SLOW),
    _cheat("grid_in_given_weights.py", RUNTIME, "the weights compared as soon as prepare is done",
           ci=Gate(1, "start x1", "input modified", "the weights were modified by prepare"), tier=SLOW),
    _cheat("hangs_on_rank0.py", RUNTIME, "the deadline on a call's `done` (rank 0 never returns)",
           ci=Gate(2, "fresh latents #1 x1", "timeout", "no 'done' line from rank 0 within"), tier=SLOW),
    _cheat("low_precision.py", BOTH, "precision: fp8 weights past the allowance; the audit's numerics rule",
           ci=Gate(1, "f5x1", "incorrect", "rms(d)"), audit=("narrow-numerics",), tier=SLOW),
    _cheat("mixes_manifest_keys", RUNTIME, "a manifest the judge cannot read is the solution's load error",
           ci=Gate(2, "load", "load error", "solution.yml: unknown keys [1, 'foo']"), tier=SLOW,
           see=("test_bench::test_a_solution_that_cannot_be_described_fails_alone",
                "test_loader::test_a_manifest_with_keys_of_two_types_is_the_solutions_load_error")),
    _cheat("modifies_weights.py", RUNTIME, "the weights checked after every call",
           ci=Gate(1, "f1x1", "input modified", "the weights were modified"), tier=SLOW),
    _cheat("name_is_a_path", RUNTIME, "a solution's name is no path (the files the judge names after it)",
           ci=Gate(2, "load", "load error", "`name` '../../../planted'"), tier=DEFAULT),
    _cheat("out_alias.py", RUNTIME, "out's storage, shape and strides",
           ci=Gate(1, "f1x1", "incorrect", "out's storage, shape or strides changed"), tier=SLOW),
    _cheat("partial_frames.py", RUNTIME, "every frame checked (half the latent frames decoded)",
           ci=Gate(1, "f5x1", "incorrect", "rms(d)"), tier=SLOW),
    _cheat("patches_sync.py", RUNTIME, "the guards: torch.cuda.synchronize replaced",
           ci=Gate(1, "start x1", "tampering", "replaced torch.cuda.synchronize"), tier=SLOW),
    _cheat("patches_timer.py", RUNTIME, "the guards: time.monotonic_ns replaced",
           ci=Gate(1, "start x1", "tampering", "replaced time.monotonic_ns"), tier=DEFAULT),
    _cheat("skips_attention.py", RUNTIME, "skipped work (the mid block's attention) fails on fresh latents",
           ci=Gate(1, "fresh latents #1 x1", "incorrect", "max|d|"), tier=SLOW),
    _cheat("stale_out.py", RUNTIME, "out poisoned with NaN before each call (an earlier call's video left there)",
           ci=Gate(1, "fresh latents #1 x1", "incorrect", "not finite (NaN is the poison"), tier=DEFAULT),
    _cheat("writes_cache_file.py", AUDIT, "the audit's file-io rule: a file cache for later runs",
           ci=Gate(3, "audit", "audit", "writes_cache_file.py"), tier=SLOW),

    # ----- cheats only the audit sees: the runtime checks pass them (the error stays within the allowance); the gate
    # passes those whose findings are review notes, and shows the notes (--strict fails them) -------------------------
    _cheat("private_ops.py", AUDIT, "the private-name rule: torch.ops.aten's cast by a name made at run time",
           ci=Gate(0, None, "passed", "review note"), audit=("private-name",), tier=SLOW),
    _cheat("unknown_module.py", AUDIT, "foreign code: a module the audit does not know (pydoc.locate to exec)",
           ci=Gate(0, None, "passed", "review note"), audit=("foreign-code",), tier=SLOW),
    _cheat("waives_its_audit.py", AUDIT, "an allowance comment of its own: listed as the solution's waiver",
           ci=Gate(0, None, "passed", "allowed by the solution: waives_its_audit.py"), tier=SLOW,
           see=("test_audit::test_a_waived_note_is_listed_for_the_reviewer",)),
    _cheat("matches_attributes.py", AUDIT, "dynamic names: attributes read by a `match` class pattern",
           ci=Gate(0, None, "passed", "review note"), audit=("dynamic-name",), tier=SLOW),
    _cheat("hides_behind_a_literal", AUDIT, "C++ read as C++17 does (no trigraphs): int8 code behind a literal",
           ci=Gate(0, None, "passed", "review note"), tier=SLOW,
           see=("test_audit::test_code_hidden_behind_a_trigraph_reading_is_read",)),
    _cheat("casts_by_type_name.py", AUDIT, "narrow numerics through a legacy type's name (torch.CharTensor)",
           ci=Gate(0, None, "passed", "review note"), audit=("narrow-numerics",), tier=SLOW),
    _cheat("accumulates_in_fp16.py", AUDIT, "narrow numerics: a Triton tl.dot into an fp16 accumulator",
           audit=("narrow-numerics",)),
    _cheat("sums_in_fp16.py", AUDIT, "narrow numerics: a sum carried in fp16 across a Triton kernel's loop",
           audit=("narrow-numerics",)),
    _cheat("resolves_by_text.py", AUDIT, "file-io: logging.config reads files and resolves a name given as text",
           audit=("file-io",)),
    _cheat("opens_through_a_stream.py", AUDIT, "file-io: a file opened through the type of sys.stdout.buffer",
           audit=("file-io",)),
    _cheat("calls_from_assembly", AUDIT, "foreign code: libc's system called from host assembly (C++)",
           audit=("foreign-code",)),
    _cheat("rounds_in_cpp", AUDIT, "narrow numerics in libtorch's C++ API (Tensor::round, clamp)",
           audit=("narrow-numerics",), see=("test_audit::test_an_int8_grid_in_libtorchs_cpp_is_narrow_numerics",)),
    _cheat("includes_by_digraph", AUDIT, "an #include spelled with a digraph is followed (int8 code in notes.txt)",
           audit=("narrow-numerics",)),
    _cheat("slows_its_audit", AUDIT, "the gate's deadline on its audit (a source read in quadratic time)",
           see=("test_ci::test_an_audit_that_does_not_end_fails_the_gate",)),

    # ----- cheats with tests of their own ---------------------------------------------------------------------------
    _cheat("cheap_after_warmup.py", RUNTIME, "every call's whole video checked (work skipped after four calls)",
           see=("test_trust::test_skipping_work_after_the_first_calls_is_incorrect",)),
    _cheat("errs_past_the_rule.py", RUNTIME, "the secret fp32 tile (an error the release check's widening lets by)",
           see=("test_ci::test_an_error_past_the_rule_within_the_release_check_fails_on_the_secret_tile",)),
    _cheat("escapes_at_build", RUNTIME, "the build runs locked down and leaves nothing (a global constructor)",
           see=("test_bench::test_the_build_runs_locked_down_and_leaves_nothing",)),
    _cheat("exhausts_ports.py", RUNTIME, "ports exhausted in prepare: bench still reports every solution",
           see=("test_bench::test_exhausted_ports_do_not_crash_bench",)),
    _cheat("fills_its_build", RUNTIME, "the build's disk cap (a constructor that fills the build folder)",
           see=("test_loader::test_a_build_that_fills_its_disk_fails_and_leaves_no_cache",)),
    _cheat("floods_the_judge.py", RUNTIME, "lines the judge did not ask for fail past a bound (its memory)",
           see=("test_trust::test_the_judge_outlasts_a_flood_of_lines",)),
    _cheat("hoards_memory.py", RUNTIME, "a memory cgroup per group (memory spread over small children)",
           see=("test_trust::test_memory_spread_over_small_processes_fails_its_group",)),
    _cheat("holds_sockets_after_its_call.py", RUNTIME, "a group's holdings counted whenever it is frozen",
           see=("test_procs::test_a_group_over_its_caps_when_frozen_is_killed_at_once",)),
    _cheat("keeps_state_in_kernel.py", RUNTIME, "no state in extended attributes, keyrings or the domain name",
           see=("test_trust::test_no_state_survives_in_kernel_state_outside_the_filesystem",)),
    _cheat("keeps_state_in_sysv.py", RUNTIME, "no state in System V IPC (namespaces; what a group made removed)",
           see=("test_trust::test_no_state_survives_in_system_v_ipc",)),
    _cheat("marks_by_pid.py", RUNTIME, "every fresh call held to the task's rule (stored calls told across groups)",
           see=("test_trust::test_gate_holds_every_call_to_the_rule_whatever_a_solution_knows",)),
    _cheat("orphans_quietly.py", RUNTIME, "without a cgroup, an orphan of prepare is the parked group's",
           see=("test_procs::test_without_a_cgroup_an_orphan_left_by_prepare_fails_its_group",)),
    _cheat("remembers_in_tcp_metrics.py", RUNTIME, "a network namespace per group (the TCP metrics cache)",
           see=("test_procs::test_network_state_stays_in_its_groups_namespace",)),
    _cheat("replays_noisily.py", RUNTIME, "bench's noise from the faster half of the fresh calls (a widened spread)",
           see=("test_trust::test_a_replay_is_not_hidden_by_slowed_fresh_calls",)),
    _cheat("replays_untimed.py", RUNTIME, "the untimed clips' repeats have a floor too",
           see=("test_ci::test_a_replay_on_an_untimed_clip_fails_without_the_audit",)),
    _cheat("resumes_a_prefix.py", RUNTIME, "a stored clip never answered from another (the clips are prefixes)",
           see=("test_trust::test_a_stored_clip_is_not_answered_from_another",
                "test_trust::test_a_stored_call_with_no_bar_gets_a_second_look")),
    _cheat("scopes_wide.py", RUNTIME, "the console: a trace's scope names shown in ASCII",
           see=("test_profile::test_a_profiled_solutions_scope_names_reach_the_console_in_ascii",)),
    _cheat("shares_a_build", RUNTIME, "the build cache keyed by every file (twins that differ in an included file)",
           see=("test_loader::test_twins_that_differ_in_an_included_file_get_build_folders_of_their_own",
                "test_loader::test_each_twin_runs_its_own_build",
                "test_audit::test_what_is_no_regular_file_is_a_finding_and_never_read")),
    _cheat("side_thread.py", BOTH, "threads left running after the call; the audit's process note",
           see=("test_ci::test_audit_findings_are_reported_beside_the_dynamic_checks",)),
    _cheat("spends_user_counts.py", RUNTIME, "a user per group: the per-user counts it spends are its group's",
           see=("test_procs::test_a_groups_per_user_counts_are_its_own",)),
    _cheat("stays_in_the_kernel.py", RUNTIME, "the freeze waits to take hold (a thread in a long system call)",
           see=("test_trust::test_work_in_the_kernel_that_outlasts_a_freeze_fails_its_group",)),
    _cheat("wrong_on_first_call.py", RUNTIME, "a shape's first call (the gate's warm-up) checked in full",
           see=("test_ci::test_a_shapes_warm_up_is_checked_in_full",)),

    # ----- cheats that need a GPU (tests/gpu/test_gpu.py) ---------------------------------------------------------------
    Fixture("tests/cheats_gpu/loads_cupti.py", CHEAT, RUNTIME,
            "the driver's process lock refuses CUPTI (GPU work queued past the call)", tier=GPU,
            see=("test_gpu::test_a_rank_that_loads_cupti_fails_before_its_gpu_work_can_outlast_its_call",)),
    Fixture("tests/cheats_gpu/other_device.py", CHEAT, RUNTIME, "a group sees only its world's GPUs", tier=GPU,
            see=("test_gpu::test_a_rank_of_world_one_cannot_reach_another_gpu",)),
    Fixture("tests/cheats_gpu/side_stream.py", CHEAT, RUNTIME, "the clock charges work left on a side stream",
            tier=GPU, see=("test_gpu::test_side_stream_work_is_inside_the_timed_window",)),
    Fixture("tests/cheats_gpu/starves_the_judge.py", CHEAT, RUNTIME, "the GPU memory cap: the judge keeps its share",
            tier=GPU, see=("test_gpu::test_a_group_that_keeps_the_gpus_memory_fails_and_the_judge_goes_on",)),
    Fixture("tests/cheats_gpu/truncates_shm.py", CHEAT, RUNTIME, "the judge's GPU buffers lent through no file of "
            "/dev/shm", tier=GPU, see=("test_gpu::test_a_rank_that_truncates_dev_shm_cannot_crash_the_judge",)),

    # ----- broken solutions: bench reports each alone, none hanging, no process left (the default tier: two) ----------
    Fixture("tests/broken/raises_on_rank1.py", BROKEN, RUNTIME, "an error on rank 1, its markup and controls as text",
            bench=Bench("runtime error", "rank 1: RuntimeError: rank 1 gives up [/] [red]??[2K?[1APASS f5x4", "f5x4",
                        ALONE), tier=DEFAULT),
    Fixture("tests/broken/hangs.py", BROKEN, RUNTIME, "the deadline on a call (slow: 11 s of waiting)",
            bench=Bench("timeout", "no 'done' line from rank 0 within", "f5x1", ALONE), tier=SLOW),
    Fixture("tests/broken/crashes.py", BROKEN, RUNTIME, "a rank that dies in the middle of a call",
            bench=Bench("crash", "died (exit code 3)", "f5x4", ALONE), tier=SLOW,
            see=("test_bench::test_one_solution_twice_runs_as_two",)),
    Fixture("tests/broken/raises_a_long_error.py", BROKEN, RUNTIME, "an error megabytes long is the solution's",
            bench=Bench("runtime error", "RuntimeError: compile failed", "f5x1", ALONE), tier=SLOW),
    Fixture("tests/broken/wrong_shape.py", BROKEN, RUNTIME, "out resized",
            bench=Bench("incorrect", "out's storage, shape or strides changed", "f5x1", ALONE), tier=SLOW),
    Fixture("tests/broken/nan.py", BROKEN, RUNTIME, "one NaN pixel",
            bench=Bench("incorrect", "1 elements not finite", "f5x1", ALONE), tier=SLOW,
            see=("test_bench::test_two_solutions_interleaved_with_a_verdict",)),
    Fixture("tests/broken/unwritten.py", BROKEN, RUNTIME, "elements left unwritten (NaN is the poison)",
            bench=Bench("incorrect", "elements not finite (NaN is the poison: unwritten elements)", "f5x1", ALONE),
            tier=SLOW),
    Fixture("tests/broken/modifies_z.py", BROKEN, RUNTIME, "the latents checked after the call",
            bench=Bench("input modified", "z was modified", "f5x1", ALONE), tier=SLOW),
    Fixture("tests/broken/build_error", BROKEN, RUNTIME, "a C++ extension that does not compile",
            bench=Bench("build error", "building broken_ext failed", "f5x1", ALONE), tier=DEFAULT,
            see=("test_loader::test_build_error_names_the_solution",)),
    Fixture("tests/broken/misspelt.py", BROKEN, RUNTIME, "no `run` (exports `runn`): a load error",
            bench=Bench("load error", "no `run", "f5x1", ALONE), tier=SLOW),
    Fixture("tests/broken/shifted_frame.py", BROKEN, RUNTIME, "error maps: a frame written one place off",
            see=("test_maps::test_a_shifted_frame_is_named",
                 "test_report::test_bench_report_names_where_the_wrong_solution_is_wrong",
                 "test_report::test_maps_without_a_report_go_into_a_folder_of_the_run",
                 "test_report::test_report_flags_say_what_they_need")),
    Fixture("tests/broken/wrong_seam.py", BROKEN, RUNTIME, "error maps: a seam row between bands one row off",
            see=("test_maps::test_a_wrong_seam_row_is_named", "test_report::test_bench_report_of_timed_solutions",
                 "test_report::test_gate_report")),
    # Honest, in broken/: a compiler's cost on each shape's first call, which the gate must not take for a replay.
    Fixture("tests/broken/compiles_per_shape.py", HONEST, RUNTIME, "a slow first call per shape is no floor for its "
            "repeats", see=("test_ci::test_a_shapes_slow_first_call_is_no_floor_for_its_repeats",)),

    # ----- the honest corpus: patterns the audit notes (`audit`: the notes, at least) and bench and the gate pass, on
    # the CPU's tiny geometry and on a GPU (the default tier gates the module tree) -----------------------------------
    Fixture("tests/honest/module_tree", HONEST, BOTH, "an nn.Module tree with mutable default arguments (Wan2.2's)",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=("state",), tier=DEFAULT),
    Fixture("tests/honest/module_cache.py", HONEST, BOTH, "a module-level dict of the weights by name",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=("state",), tier=SLOW),
    Fixture("tests/honest/thread_pool.py", HONEST, BOTH, "a thread pool joined within run",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=("process",), tier=SLOW),
    Fixture("tests/honest/kept_pool.py", HONEST, BOTH, "a thread pool made at import and kept between calls",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=("process",), tier=SLOW),
    Fixture("tests/honest/compiled.py", HONEST, BOTH, "torch.compile per region, every latent frame",
            ci=Gate(0, None, "passed", ""), audit=(), tier=SLOW),
    Fixture("tests/honest/cpp_extension", HONEST, BOTH, "a C++ extension built from solution.yml",
            ci=Gate(0, None, "passed", ""), audit=(), tier=SLOW),
    Fixture("tests/honest/workspace.py", HONEST, BOTH, "a workspace kept between calls",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=("state",), tier=SLOW),
    Fixture("tests/honest/cuda_graph.py", HONEST, BOTH, "a CUDA graph per shape (eager on the CPU)",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=("state",), tier=SLOW),
    Fixture("tests/honest/setup_lines.py", HONEST, BOTH, "setup lines at import: TF32 on, bf16 the default dtype",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=("monkeypatch",), tier=SLOW),
    Fixture("tests/honest/self_test.py", HONEST, BOTH, "a script's __main__ self-test that reads the data and saves",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=(), tier=SLOW),
    Fixture("tests/honest/logs_progress.py", HONEST, BOTH, "logging.basicConfig, prints and a progress line on stderr",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=(), tier=SLOW),
    Fixture("tests/honest/tunables.py", HONEST, BOTH, "tunables from the environment, a seed, an lru_cache, a "
            "custom op, gc and empty_cache after each call", bench=Bench("passed", run=CORPUS),
            ci=Gate(0, None, "passed", ""), audit=("environment", "state", "introspection"), tier=SLOW),
    Fixture("tests/honest/default_group.py", HONEST, BOTH, "torch.distributed's default group instead of pg",
            bench=Bench("passed", run=CORPUS), ci=Gate(0, None, "passed", ""), audit=(), tier=SLOW),
    Fixture("solutions/diffusers", HONEST, BOTH, "diffusers' own decode (an optional dependency)",
            ci=Gate(0, None, "passed", ""), audit=(), tier=SLOW),

    # ----- probes: solutions that fail where their rank's confinement is loose ------------------------------------
    Fixture("tests/probes/compiles.py", PROBE, RUNTIME, "torch.compile's own wrappers are not the solution's "
            "tampering", see=("test_procs::test_an_honest_torch_compile_is_not_tampering",)),
    Fixture("tests/probes/locked_down.py", PROBE, RUNTIME,
            "a rank locked down beyond Landlock: its user, the filter, namespaces, only its group's GPUs",
            see=("test_procs::test_cpu_ranks_are_locked_down_beyond_landlock",
                 "test_gpu::test_ranks_at_world_one_are_locked_down_and_profile",
                 "test_gpu::test_ranks_at_world_two_are_locked_down_over_nccl")),
    Fixture("tests/probes/needs_user_counts.py", PROBE, RUNTIME, "a user per group: its own per-user counts (beside "
            "spends_user_counts.py)", see=("test_procs::test_a_groups_per_user_counts_are_its_own",)),
]

BY_PATH = {f.path: f for f in FIXTURES}


def on_disk():
    """The fixtures the folders hold: each folder's direct children but README.md and names starting with '_' or
    '.' (__pycache__ among them), as paths from the repository's root."""
    return sorted(f"{folder}/{name}" for folder in FOLDERS for name in os.listdir(os.path.join(ROOT, folder))
                  if name != "README.md" and not name.startswith(("_", ".")))
