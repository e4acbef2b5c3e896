"""Make the task's data set: python -m data.make [--tiny] [--clips f121,f241] [--seed N] [--checkpoint PATH]
[--latents DIR] [--force]; or check the decode's band split on this machine: python -m data.make --check [--tiny]

Writes into spec.data_dir(geometry) ($DATA, default /data; the tiny geometry's in $DATA/tiny) what spec's loaders
read: decoder_weights_bf16.pt and weight_names.json, latents_<source>.pt per source, ref_<clip>.pt per clip (the fp32
decode, TF32 off, stored as fp16), calibration.json (the release's bf16 decode against each ref) and manifest.json.

Design:
- Synthetic by default (data/synth.py): weights and latents deterministic from one seed, --seed N, or without it a
  secret one, drawn (secrets.randbits(62)) when the data set is new. The seed is the secret of the latents, so that a
  solution cannot regenerate them ahead of time: it is recorded only in the folder's manifest.json (each synthetic
  file's recipe), which solutions cannot read, never printed and never in a file name. The synthetic weights come
  from the same seed but are no secret (a solution is handed them; synth's streams do not give the seed away).
  --checkpoint imports real decoder weights and --latents real latents (data/checkpoint.py); a new source's
  synthetic latents then use the folder's recorded seed, or a new secret one if it has none.
- A clip needs the shorter clips of its source too, and each source is decoded once, in fp32 and in bf16, to the
  longest clip needed (data/decode.py). For the full geometry every visible GPU runs a worker (a process), and each
  source's fp32 decode may be split into bands of columns (data/bands.py: exact, each with the halo of its receptive
  field) so that the decodes keep every GPU busy to the end (data/tasks.py); the tiny geometry decodes on the CPU, in
  this process, whole. One progress display shows the whole set's work, counted in FLOPs, and its remaining time.
- A checkpoint or latents file that cannot be read or has the wrong tensors is reported in one line naming the file
  and what was expected, before anything in the data folder changes.
- manifest.json records each file's size, sha256 and recipe (data/store.py). A rerun skips what is up to date,
  remakes what is missing, corrupt or made from another recipe, and removes refs that the new weights or latents
  leave stale. Without --seed, --checkpoint or --latents a rerun keeps the data set's own recipe (its recorded seed,
  a new secret seed when it is new); --seed N other than the recorded seed remakes the weights, latents and refs.
- Every file is written atomically; a lock file serialises makers of one folder.

The harness calls ensure(clips, geometry): a quick check of sizes and recipes, and a make only when it fails (with
the folder's own recipe: a new data set gets a secret seed).
"""
import argparse
import contextlib
import fcntl
import json
import os
import secrets
import sys
import time

import torch
from rich.console import Console

import spec
from data import check, checkpoint as ckpt, refs, store, synth
from data.display import Display


class DataDirError(ValueError):
    """The data folder cannot be created or written."""


def expand(clips):
    """The clips needed to make `clips`: each with the shorter clips of its source, in spec.CLIPS's order."""
    clips = list(spec.CLIPS) if clips is None else [clips] if isinstance(clips, str) else list(clips)
    unknown = [c for c in clips if c not in spec.CLIPS]
    if unknown:
        raise ValueError(f"unknown clip(s) {', '.join(unknown)}: the clips are {', '.join(spec.CLIPS)}")
    longest = {}
    for c in clips:
        e = spec.CLIPS[c]
        longest[e["source"]] = max(longest.get(e["source"], 0), e["latent_frames"])
    return [c for c, e in spec.CLIPS.items() if e["latent_frames"] <= longest.get(e["source"], 0)]


def _latents_name(source):
    return f"latents_{source}.pt"


def _ref_recipe(geometry, clip, weights_origin, latents_origin):
    e = spec.CLIPS[clip]
    return store.recipe(geometry, clip=clip, source=e["source"], latent_frames=e["latent_frames"],
                        weights=weights_origin, latents=latents_origin)


def _expected_ref_recipe(manifest, geometry, clip):
    """The recipe a clip's ref must have to match the weights and latents in the folder now (None if absent)."""
    w = manifest.recipe(spec.WEIGHTS_FILE)
    z = manifest.recipe(_latents_name(spec.CLIPS[clip]["source"]))
    return _ref_recipe(geometry, clip, w["weights"], z["latents"]) if w and z else None


def _calibrated(manifest, clip):
    return ((manifest.recipe(spec.CALIBRATION_FILE) or {}).get("clips") or {}).get(clip)


def _present(root, geometry, clips):
    """ensure()'s quick check: every file that `clips` need is there with its manifest size, and the refs and
    calibration entries were made from the weights and latents that are there. No hashing."""
    m = store.Manifest(root, geometry)
    names = [spec.WEIGHTS_FILE, spec.NAMES_FILE, spec.CALIBRATION_FILE]
    names += [_latents_name(s) for s in dict.fromkeys(spec.CLIPS[c]["source"] for c in clips)]
    names += [f"ref_{c}.pt" for c in clips]
    if not all(m.present(n) for n in names):
        return False
    weights = m.recipe(spec.WEIGHTS_FILE) or {}
    if (weights.get("format"), weights.get("geometry")) != (store.FORMAT, geometry.name) \
            or m.recipe(spec.NAMES_FILE) != store.recipe(geometry):
        return False
    for c in clips:
        want = _expected_ref_recipe(m, geometry, c)
        if want is None or m.recipe(f"ref_{c}.pt") != want or _calibrated(m, c) != want:
            return False
    return True


def _prepare(root):
    try:
        os.makedirs(root, exist_ok=True)
        probe = os.path.join(root, f"{store.TMP_PREFIX}probe.{os.getpid()}")
        with open(probe, "wb"):
            pass
        os.unlink(probe)
    except OSError as e:
        data = os.environ.get("DATA")
        raise DataDirError(f"cannot write the data set to {root}: {e.strerror or e}. Set DATA= to a writable folder "
                           f"(now DATA={data if data else 'unset, so /data'})") from e


@contextlib.contextmanager
def _locked(root):
    with open(os.path.join(root, ".make.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class _Maker:
    """One make of one folder: decides what is stale, makes it, records it."""

    def __init__(self, geometry, force, out):
        self.geometry, self.force, self.out = geometry, force, out
        self.root = spec.data_dir(geometry)
        self.manifest = store.Manifest(self.root, geometry)
        self.verified = set()  # checkpoint files hashed in this make
        self.loaded = None     # the --checkpoint's fp32 weights, when they are new to the folder
        if self.manifest.problem:
            out.note(self.manifest.problem)

    def stale(self, name, want):
        """True (with a note) when `name` must be made; False (with a note) when it is skipped."""
        why = "--force" if self.force else self.manifest.status(name, want)
        if why is None:
            self.out.note(f"skipped {name} (up to date)")
        elif why == "missing":
            self.out.note(f"making {name}")
        else:
            self.out.note(f"remaking {name}: {why}")
        return why is not None

    def recorded_seed(self):
        """The seed of the folder's synthetic weights, else of its first synthetic latents; None if it has none."""
        parts = [(spec.WEIGHTS_FILE, "weights")]
        parts += [(name, "latents") for name in sorted(self.manifest.files) if name.startswith("latents_")]
        for name, part in parts:
            recipe = self.manifest.recipe(name)
            origin = recipe.get(part) if isinstance(recipe, dict) else None
            if isinstance(origin, dict) and origin.get("kind") == "synthetic" and type(origin.get("seed")) is int:
                return origin["seed"]
        return None

    def origins(self, seed, checkpoint, latents_dir, sources):
        """(weights origin, where its checkpoint is), {source: (latents origin, where its file is)}. The seed of
        what is synthetic and new: `seed`, else the folder's recorded seed, else a new secret one."""
        m, g = self.manifest, self.geometry
        old = m.files.get(spec.WEIGHTS_FILE)
        drawn = []

        def default_seed():
            if seed is not None:
                return seed
            if not drawn:
                recorded = self.recorded_seed()
                drawn.append(recorded if recorded is not None else secrets.randbits(62))
                if recorded is None:
                    self.out.note(f"new synthetic data: its seed is a secret, drawn now and kept in "
                                  f"{spec.MANIFEST_FILE} only (--seed N for reproducible data)")
            return drawn[0]

        if checkpoint is not None:
            path = ckpt.find(checkpoint)
            weights = ({"kind": "checkpoint", "sha256": store.sha256(path)}, os.path.abspath(path))
            self.verified.add(weights[1])
            if m.recipe(spec.WEIGHTS_FILE) != store.recipe(self.geometry, weights=weights[0]):
                self.loaded = ckpt.load(path, self.geometry)   # read (and checked) before anything is written
        elif seed is None and old is not None and isinstance(old.get("recipe"), dict):
            weights = (old["recipe"]["weights"], old.get("from"))
        else:
            weights = ({"kind": "synthetic", "seed": default_seed()}, None)
        latents = {}
        for s in sources:
            old = m.files.get(_latents_name(s))
            if latents_dir is not None:
                path = os.path.abspath(os.path.join(latents_dir, _latents_name(s)))
                ckpt.check_latents(path, g)
                latents[s] = ({"kind": "file", "sha256": store.sha256(path)}, path)
            elif seed is None and old is not None and isinstance(old.get("recipe"), dict):
                latents[s] = (old["recipe"]["latents"], old.get("from"))
            else:
                latents[s] = ({"kind": "synthetic", "seed": default_seed()}, None)
        return weights, latents

    def checkpoint_file(self, origin, path):
        """The checkpoint file of a checkpoint origin, checked against its hash."""
        if path in self.verified:
            return path
        if path is None or not os.path.isfile(path) or store.sha256(path) != origin["sha256"]:
            raise ValueError(f"the weights in {self.root} came from a checkpoint ({path}) that is gone or changed: "
                             f"pass --checkpoint PATH (or --seed N for synthetic data)")
        return path

    def weights(self, origin, source_path):
        g, name = self.geometry, spec.WEIGHTS_FILE
        path = os.path.join(self.root, name)
        if self.stale(name, store.recipe(g, weights=origin)):
            if origin["kind"] == "synthetic":
                w32 = synth.weights(g, origin["seed"])
            else:
                w32 = self.loaded or ckpt.load(self.checkpoint_file(origin, source_path), g)
            store.save_torch([w.to(torch.bfloat16).contiguous() for w in w32], path)
            self.manifest.record(name, store.recipe(g, weights=origin),
                                 **({"from": source_path} if source_path else {}))
        if self.stale(spec.NAMES_FILE, store.recipe(g)):
            store.save_json([{"name": n, "shape": list(s)} for n, s in spec.weight_list(g)],
                            os.path.join(self.root, spec.NAMES_FILE))
            self.manifest.record(spec.NAMES_FILE, store.recipe(g))

    def weights_for_refs(self, origin, source_path):
        """decode.load_weights32's argument: the references decode the shipped bf16 weights upcast (synthetic), or
        the checkpoint's own fp32 values."""
        if origin["kind"] == "synthetic":
            return ("bf16", os.path.join(self.root, spec.WEIGHTS_FILE))
        return ("checkpoint", self.checkpoint_file(origin, source_path))

    def latents(self, source, origin, source_path):
        g, name = self.geometry, _latents_name(source)
        want = store.recipe(g, source=source, latents=origin)
        if not self.stale(name, want):
            return
        path = os.path.join(self.root, name)
        if origin["kind"] == "synthetic":
            store.save_torch({"latents": synth.latents(g, origin["seed"], source)}, path)
        else:
            if source_path is None or not os.path.isfile(source_path):
                raise ValueError(f"{name} came from {source_path}, which is gone: pass --latents DIR")
            ckpt.check_latents(source_path, g)
            store.copy_file(source_path, path)
            if store.sha256(path) != origin["sha256"]:
                raise ValueError(f"{source_path} changed since {name} was made from it: pass --latents DIR")
        self.manifest.record(name, want, **({"from": source_path} if source_path else {}))

    def calibration(self):
        path = os.path.join(self.root, spec.CALIBRATION_FILE)
        if self.manifest.status(spec.CALIBRATION_FILE, self.manifest.recipe(spec.CALIBRATION_FILE)) is None:
            with open(path) as f:
                return json.load(f), dict(self.manifest.recipe(spec.CALIBRATION_FILE)["clips"])
        if os.path.exists(path):
            self.out.note(f"{spec.CALIBRATION_FILE} does not match the manifest: its entries will be remade")
        return {}, {}

    def save_calibration(self, entries, recipes):
        store.save_json(dict(sorted(entries.items())), os.path.join(self.root, spec.CALIBRATION_FILE))
        self.manifest.record(spec.CALIBRATION_FILE, store.recipe(self.geometry, clips=dict(sorted(recipes.items()))))

    def drop_stale_refs(self, entries, recipes):
        """Remove refs (and their calibration entries) made from weights or latents that the folder no longer has."""
        changed = False
        for clip in spec.CLIPS:
            name = f"ref_{clip}.pt"
            want = _expected_ref_recipe(self.manifest, self.geometry, clip)
            if name in self.manifest.files and self.manifest.recipe(name) != want:
                self.out.note(f"removed {name} and its calibration: made from other weights or latents")
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.root, name))
                self.manifest.forget(name)
            if clip in recipes and recipes[clip] != want:
                entries.pop(clip, None)
                recipes.pop(clip)
                changed = True
        if changed:
            self.save_calibration(entries, recipes)


def make(clips=None, geometry=spec.FULL, *, seed=None, checkpoint=None, latents=None, force=False, progress=True,
         console=None, devices=None, bands=None):
    """Make the data that `clips` (default: all) need in spec.data_dir(geometry); return calibration.json's
    entries of those clips. seed/checkpoint/latents: the recipe (None: the folder's own; for a new data set synthetic
    data from a secret seed, recorded in its manifest.json only). devices: the workers' (default: every visible GPU
    for the full geometry, else one CPU worker; several CPU devices are simulated workers); bands: every source's fp32
    decode in this many bands (default: tasks.plan's choice)."""
    start = time.perf_counter()
    out = Display(console, progress)
    g, need = geometry, expand(clips)
    root = spec.data_dir(g)
    _prepare(root)
    with _locked(root):
        for name in os.listdir(root):
            if name.startswith(store.TMP_PREFIX):
                out.note(f"removed {name}, left over by an interrupted make")
                os.unlink(os.path.join(root, name))
        mk = _Maker(g, force, out)
        longest = {}
        for c in need:
            longest[spec.CLIPS[c]["source"]] = spec.CLIPS[c]["latent_frames"]
        (w_origin, w_path), l_origins = mk.origins(seed, checkpoint, latents, list(longest))
        mk.weights(w_origin, w_path)
        for s, (origin, path) in l_origins.items():
            mk.latents(s, origin, path)

        entries, recipes = mk.calibration()
        want = {c: _ref_recipe(g, c, w_origin, l_origins[spec.CLIPS[c]["source"]][0]) for c in need}
        jobs = []
        for s, t in longest.items():
            clips_s = {c: spec.CLIPS[c]["latent_frames"] for c in need if spec.CLIPS[c]["source"] == s}
            why = {}
            for c in clips_s:
                why[c] = "--force" if force else mk.manifest.status(f"ref_{c}.pt", want[c])
                if why[c] is None and (recipes.get(c) != want[c] or c not in entries):
                    why[c] = "its calibration entry is missing or stale"
            if not any(why.values()):
                for c in clips_s:
                    out.note(f"skipped ref_{c}.pt (up to date)")
                continue
            for c, r in why.items():
                if r is not None:
                    out.note(f"making ref_{c}.pt" if r == "missing" else f"remaking ref_{c}.pt: {r}")
            out.note(f"decoding {s} to {t} latent frames for {', '.join(clips_s)} (all their refs are rewritten)")
            jobs.append({"source": s, "latent_frames": t, "clips": clips_s})

        def on_ref(clip, described):
            mk.manifest.record(f"ref_{clip}.pt", want[clip], described)
            out.note(f"wrote ref_{clip}.pt")

        def on_calibration(new):
            entries.update(new)
            recipes.update({c: want[c] for c in new})
            mk.save_calibration(entries, recipes)

        if jobs:
            devices = refs.devices(g, devices)
            if devices[0].type == "cpu" and g.name == "full":
                out.note("no GPU: the full geometry's fp32 decodes on the CPU will take hours")
            refs.make(jobs, g, root, mk.weights_for_refs(w_origin, w_path), devices, bands, out, on_ref, on_calibration)
        mk.drop_stale_refs(entries, recipes)
        out.summary(entries, need)
        out.note(f"wall time {time.perf_counter() - start:.1f} s: {', '.join(need)} in {root} ({g.name} geometry)")
        return {c: entries[c] for c in need}


def ensure(clips, geometry=spec.FULL, progress=True):
    """Make whatever the clips' data lacks. A quick no-op (sizes and recipes from the manifest, no hashing) when it is
    all there; otherwise a make with the folder's own recipe (hashing what it keeps), its output on stderr."""
    need = expand(clips)
    if not _present(spec.data_dir(geometry), geometry, need):
        make(need, geometry, progress=progress, console=Console(stderr=True))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m data.make", description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="the tiny geometry (CPU), in $DATA/tiny")
    p.add_argument("--clips", help=f"comma list of clips (default: all: {','.join(spec.CLIPS)})")
    p.add_argument("--seed", type=int, help="synthetic weights and latents from this seed, reproducibly (default: the "
                                            "data set's own recipe; a secret seed, drawn now, for a new one)")
    p.add_argument("--checkpoint", help="import decoder weights: a diffusers safetensors file or folder, or the "
                                        "original Wan2.2_VAE.pth")
    p.add_argument("--latents", help="a folder of latents_<source>.pt files to use")
    p.add_argument("--force", action="store_true", help="remake every file that the clips need")
    p.add_argument("--check", action="store_true", help="instead of making data: decode a short synthetic clip whole "
                                                        "and in bands over every GPU (the tiny geometry on the CPU "
                                                        "without one) and compare them (data/check.py)")
    a = p.parse_args(argv)
    if a.check:
        return _check(a.tiny)
    clips = [c for c in a.clips.split(",") if c] if a.clips else None
    try:
        make(clips, spec.TINY if a.tiny else spec.FULL, seed=a.seed, checkpoint=a.checkpoint, latents=a.latents,
             force=a.force)
    except ValueError as e:
        print(f"data.make: error: {e}", file=sys.stderr)
        return 1
    return 0


def _check(tiny):
    out = Display()
    g = spec.TINY if tiny else spec.FULL
    devices = refs.devices(g)
    if devices[0].type == "cpu":
        if g.name == "full":
            out.note("no GPU: checking the tiny geometry on the CPU instead")
            g = spec.TINY
        devices = [torch.device("cpu")] * 2
    return 0 if check.passed(check.run(g, devices, out)) else 1


if __name__ == "__main__":
    sys.exit(main())
