#!/usr/bin/env bash
# Times `python -m data.make` making a fresh data set (seed 0) in a temporary folder on this machine's GPUs, and
# prints what it needs beside the maker's own tables (the decode tasks: per task its worker, seconds and TFLOP/s; the
# fp32 decodes' rate; the calibration): the machine, the software, the commit, and the command's wall time.
#
#   tools/data/time_make.sh [CLIPS [MAKE ARGS...]]   # CLIPS: a comma list for --clips, or "all"
#
# (e.g. `time_make.sh f17 --tiny` is a smoke run on the CPU).
# Default clips: the whole set with two or more GPUs (about 5 minutes on two H200s at the fp32 rate measured so far);
# with one GPU f241 alone (one source, 61 latent frames: about 3 minutes), since the whole set there takes about
# 9 minutes at that rate. `python -m data.make --check` (about a minute) is a separate command.
set -euo pipefail
cd "$(dirname "$0")/../.."
gpus=$(python -c "import torch; print(torch.cuda.device_count())")
clips=${1:-$([ "$gpus" -ge 2 ] && echo all || echo f241)}
data=$(mktemp -d "${TMPDIR:-/tmp}/data-make.XXXXXX")
trap 'rm -rf "$data"' EXIT
nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm,power.limit --format=csv || true
python -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuDNN', \
torch.backends.cudnn.version(), 'GPUs', torch.cuda.device_count())"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with changes)')"
args=(--seed 0)
[ "$clips" = all ] || args+=(--clips "$clips")
args+=("${@:2}")
echo "command: DATA=$data python -m data.make ${args[*]}"
start=$(date +%s.%N)
DATA=$data python -m data.make "${args[@]}"
end=$(date +%s.%N)
python - "$start" "$end" "$clips" "$gpus" <<'EOF'
import sys
start, end, clips, gpus = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"\n{'clips':<10}{'GPUs':>5}{'wall s':>10}")
print(f"{clips:<10}{gpus:>5}{end - start:>10.1f}   (the whole command: start-up, files, decodes, refs)")
EOF
