"""The task's data maker: `python -m data.make` (make.py), synthetic data (synth.py), real checkpoints and latents
(checkpoint.py), the reference decodes (decode.py), and the data folder's files and manifest (store.py)."""
