"""The data folder a rank sees: the weights' names and decoy references (wrong videos of the right format), never
the real data. The sandbox keeps the real folder out of reach; the decoys catch a solution that looks for stored
answers where spec.data_dir() points: each is armed before a call with its access time older than its
modification time, so that any read moves it (relatime), and checked after."""
import os
import shutil

import spec

HOUR_NS = 3_600_000_000_000


class Decoys:
    def __init__(self, folder, geometry):
        import torch
        self.folder = folder
        geo = folder if geometry.name == "full" else os.path.join(folder, geometry.name)
        os.makedirs(geo, exist_ok=True)
        shutil.copyfile(os.path.join(spec.data_dir(geometry), spec.NAMES_FILE), os.path.join(geo, spec.NAMES_FILE))
        self.paths = []
        for clip, e in spec.CLIPS.items():
            path = os.path.join(geo, f"ref_{clip}.pt")
            torch.save({"video": torch.zeros((1, 3, 1, *geometry.video_hw), dtype=torch.float16),
                        "source": e["source"], "latent_frames": e["latent_frames"]}, path)
            self.paths.append(path)
        for source in spec.SOURCES:
            path = os.path.join(geo, f"latents_{source}.pt")
            torch.save({"latents": torch.zeros((1, geometry.latent_channels, 1, *geometry.latent_hw))}, path)
            self.paths.append(path)
        self.works = self._atime_works(os.path.join(folder, "control"))
        self.arm()

    @staticmethod
    def _atime_works(path):
        """Whether this filesystem moves access times at all (noatime mounts don't)."""
        with open(path, "wb") as f:
            f.write(b"x")
        st = os.stat(path)
        os.utime(path, ns=(st.st_mtime_ns - HOUR_NS, st.st_mtime_ns))
        before = os.stat(path).st_atime_ns
        with open(path, "rb") as f:
            f.read()
        return os.stat(path).st_atime_ns != before

    def arm(self):
        self.armed = {}
        for path in self.paths:
            st = os.stat(path)
            os.utime(path, ns=(st.st_mtime_ns - HOUR_NS, st.st_mtime_ns))
            self.armed[path] = os.stat(path).st_atime_ns

    def read(self):
        """Names of the decoys read since arm()."""
        return [os.path.basename(p) for p, t in self.armed.items() if os.stat(p).st_atime_ns != t]
