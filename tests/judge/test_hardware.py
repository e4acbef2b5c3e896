"""Which GPUs and device nodes a group of ranks gets: rank r runs on GPU r, so a group of `world` ranks sees the
judge's first `world` GPUs (by UUID) and, of /dev/nvidia*, the driver's shared nodes and those GPUs' own."""
import os

from harness.judge import hardware, rank_env
from harness.judge.session import Session

INFO = "Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-{uuid}\nBus Location: \t 0000:{bus}:00.0\nDevice Minor: \t {minor}\n"


def _driver(tmp_path, gpus):
    """A fake /proc/driver/nvidia/gpus and /dev: gpus is [(uuid, minor)]."""
    proc, dev = tmp_path / "gpus", tmp_path / "dev"
    dev.mkdir()
    for k, (uuid, minor) in enumerate(gpus):
        (proc / f"0000:{k:02x}:00.0").mkdir(parents=True)
        (proc / f"0000:{k:02x}:00.0" / "information").write_text(INFO.format(uuid=uuid, bus=f"{k:02x}", minor=minor))
        (dev / f"nvidia{minor}").write_text("")
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "null"):
        (dev / name).write_text("")
    (dev / "nvidia-caps").mkdir()
    return str(proc), str(dev)


def test_minor_numbers_come_from_the_drivers_table(tmp_path):
    proc, _ = _driver(tmp_path, [("a", 3), ("b", 0)])
    os.makedirs(os.path.join(proc, "0000:99:00.0"))             # an entry without its information: left out
    assert hardware.minors(proc) == {"GPU-a": 3, "GPU-b": 0}
    assert hardware.minors(str(tmp_path / "none")) == {}


def test_a_group_gets_the_shared_nodes_and_its_own_gpus_only(tmp_path):
    proc, dev = _driver(tmp_path, [("a", 3), ("b", 0), ("c", 1)])
    table = hardware.minors(proc)
    shared = [os.path.join(dev, n) for n in ("nvidia-caps", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools",
                                             "nvidiactl")]
    assert sorted(hardware.device_nodes(["GPU-a"], table, dev)) == sorted(shared + [os.path.join(dev, "nvidia3")])
    assert sorted(hardware.device_nodes(["GPU-a", "GPU-b"], table, dev)) == \
        sorted(shared + [os.path.join(dev, "nvidia3"), os.path.join(dev, "nvidia0")])
    assert hardware.device_nodes(["GPU-x"], table, dev) is None      # unknown: the caller falls back, and says so


def test_rank_env_names_the_groups_gpus(monkeypatch):
    e = rank_env.rank_env(1, 2, 29500, "/s", False, "/d", "/b", "/p", gpus="GPU-a,GPU-b")
    assert e["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-b"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")      # the judge's own setting does not reach a GPU rank
    e = rank_env.rank_env(0, 1, 29500, "/s", False, "/d", "/b", "/p", gpus="GPU-c")
    assert e["CUDA_VISIBLE_DEVICES"] == "GPU-c"


def test_run_gives_world_w_the_first_w_gpus(tmp_path, monkeypatch):
    proc, dev = _driver(tmp_path, [("a", 2), ("b", 0), ("c", 1), ("d", 3)])
    run = Session(None, True, isolation=False)
    try:
        run.gpus, run.minors = ["GPU-a", "GPU-b", "GPU-c", "GPU-d"], hardware.minors(proc)
        real = hardware.device_nodes
        monkeypatch.setattr(hardware, "device_nodes", lambda uuids, table: real(uuids, table, dev))
        visible, nodes = run.gpus_for(1)
        assert visible == "GPU-a" and os.path.join(dev, "nvidia2") in nodes
        assert not any(os.path.join(dev, f"nvidia{m}") in nodes for m in (0, 1, 3))
        visible, nodes = run.gpus_for(2)
        assert visible == "GPU-a,GPU-b" and {os.path.join(dev, "nvidia2"), os.path.join(dev, "nvidia0")} <= set(nodes)
        assert os.path.join(dev, "nvidia1") not in nodes and os.path.join(dev, "nvidiactl") in nodes
    finally:
        run.close()
