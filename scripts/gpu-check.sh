#!/usr/bin/env bash
# The GPU check kit (docs/gpu.md). Two steps, one per machine:
#   bash scripts/gpu-check.sh prepare        here: wheels the GPU machine lacks + a raw JPEG
#                                            dataset into .gpucheck/ (ignored); prints what to
#                                            carry and its size, fails over 64 MiB
#   bash scripts/gpu-check.sh run [--cpu] [-- ARGS]
#                                            on the GPU machine, from the repository root:
#                                            installs the carried wheels into a temporary
#                                            --target folder (unless this Python already
#                                            imports them), then python -m benchmarks.gpucheck
#                                            run (ARGS go to it); --cpu skips the CUDA steps
# Environment: PYTHON (prepare: the Python whose installed versions the wheels match, default
# the README's .venv/bin/python where it exists, else python3; run: default python3, the GPU
# machine's), GPUCHECK_PY (wheels' Python version, default 3.12), GPUCHECK_CUDA (the GPU's CUDA
# major, 12 or 13, default 13), GPUCHECK_IMAGES (default 1792), OUT (where run writes; default
# gpucheck-out).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${1:-}" = prepare ] && [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ]; then
  PY=.venv/bin/python  # scripts/dev.sh's: it has zarr and the rest, the system python3 may not
fi
KIT=.gpucheck
LIMIT_MIB=64
# What the loaders, the in-process build and the gpu tests import that the GPU machine's image
# lacks; checked by importing them there (install_wheels). simplejpeg decodes a JPEG store on
# the CPU; nvImageCodec (for the GPU's CUDA, GPUCHECK_CUDA, default 13) and its nvJPEG decode it
# on the device (the decode row); nvImageCodec's wheel is cut down to what the check runs.
WHEELS=(zarr numcodecs crc32c donfig google-crc32c soundfile cffi pycparser soxr simplejpeg)
CUDA=${GPUCHECK_CUDA:-13}
IMPORTS="import zarr, numcodecs, crc32c, soundfile, simplejpeg, nvidia.nvimgcodec"

version_of() {
  "$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"
}

gpu_pins() {
  # nvImageCodec at the release installed here (the cu12 or cu13 build), for the GPU's CUDA
  local have nvjpeg
  have=$(version_of nvidia-nvimgcodec-cu12 2>/dev/null || version_of "nvidia-nvimgcodec-cu$CUDA")
  nvjpeg=$([ "$CUDA" = 12 ] && echo "nvidia-nvjpeg-cu12" || echo "nvidia-nvjpeg>=$CUDA,<$((CUDA + 1))")
  echo "nvidia-nvimgcodec-cu$CUDA==$have" "$nvjpeg"
}

download_wheels() {
  local pins=() name
  for name in "${WHEELS[@]}"; do
    pins+=("$name==$(version_of "$name")")
  done
  read -r -a gpu <<<"$(gpu_pins)"
  pins+=("${gpu[@]}")
  rm -rf "$KIT/wheels"
  "$PY" -m pip download -q --no-deps --only-binary=:all: \
    --python-version "${GPUCHECK_PY:-3.12}" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$KIT/wheels" "${pins[@]}"
  "$PY" -m benchmarks.gpucheck slim-wheel --python "${GPUCHECK_PY:-3.12}" \
    "$KIT"/wheels/nvidia_nvimgcodec_*.whl
}

carried_report() {
  local kit_bytes tracked_bytes total
  kit_bytes=$(du -sb "$KIT" | cut -f1)
  tracked_bytes=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  total=$((kit_bytes + tracked_bytes))
  echo "carry: $KIT ($(ls "$KIT/wheels" | wc -l) wheels, $(find "$KIT/data" -type f | wc -l) images)"
  echo "size: $KIT $((kit_bytes / 1024)) KiB + tracked files $((tracked_bytes / 1024)) KiB" \
    "= $((total / 1024)) KiB of the $LIMIT_MIB MiB a command may carry"
  if [ "$total" -gt $((LIMIT_MIB * 1024 * 1024)) ]; then
    echo "too large: lower GPUCHECK_IMAGES" >&2
    return 1
  fi
}

prepare() {
  download_wheels
  rm -rf "$KIT/data"
  "$PY" -m benchmarks.gpucheck make-data --out "$KIT/data" --images "${GPUCHECK_IMAGES:-1792}"
  carried_report
}

install_wheels() {
  # The wheels only where this Python lacks what they bring (here, a dev .venv has it all).
  if "$PY" -c "$IMPORTS" 2>/dev/null; then
    echo "gpu-check: this Python runs '$IMPORTS': no wheels installed"
    return
  fi
  local site
  site=$(mktemp -d "${TMPDIR:-/tmp}/gpucheck-site.XXXXXX")
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
    "$KIT"/wheels/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  # nvJPEG's wheel puts libnvjpeg under nvidia/cu13/lib (CUDA 13) or nvidia/nvjpeg/lib (12):
  # where nvImageCodec's dlopen finds it
  export LD_LIBRARY_PATH="$site/nvidia/cu$CUDA/lib:$site/nvidia/nvjpeg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "gpu-check: carried wheels installed into $site"
}

run() {
  local args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --cpu) args+=(--cpu); shift ;;
      --) shift; args+=("$@"); break ;;
      *) echo "run: unknown option $1 (extra options go after --)" >&2; exit 2 ;;
    esac
  done
  install_wheels
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  "$PY" -m benchmarks.gpucheck run --data "$KIT/data" --out "${OUT:-gpucheck-out}" \
    "${args[@]+"${args[@]}"}"
}

case "${1:-}" in
  prepare) prepare ;;
  run) shift; run "$@" ;;
  *)
    echo "usage: bash scripts/gpu-check.sh prepare | run [--cpu] [-- ARGS]" >&2
    exit 2
    ;;
esac
