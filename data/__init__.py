"""The task's data maker: `python -m data.make` (make.py), synthetic data (synth.py), real checkpoints and latents
(checkpoint.py), the reference decodes as tasks on workers (refs.py, tasks.py, decode.py; the fp32 decode in exact
bands: bands.py), the console (display.py), `--check` (check.py), and the data folder's files and manifest
(store.py)."""
