#!/usr/bin/env bash
# The whole GPU check of issue 28 as one command: at most 9 minutes on one H100, each part in its own time box, each
# writing RESULTS/PART_cuda.json as it goes (the environment first: "device": "cuda", the GPU's name, torch, the date
# and the command; benchmarks/common.py). The parts (benchmarks/device_check.py, benchmarks/official_hcl_image.py):
#
#   setup        CIFAR-10 extracted from its JPEG archive and prepared (hcl prepare --dataset imagefolder) in WORK
#   tests        the test suite on CUDA, alone on the machine (pytest-xdist when installed)      tests_cuda.json
#   throughput   one epoch of the product's loop per setting: ResNet-18 B=512 bf16 and fp32 for
#                every sampler, --compile, ResNet-50 B=256 bf16 and fp32                         throughput_cuda.json
#   official     HCL's official image code: one epoch of its own train(), unmodified, on CIFAR-10
#                rebuilt in its pickled layout; its speed over hcl's ResNet-50 rows              official_hcl_image_cuda.json
#   profile      torch.profiler over 5 steps of ucl: top kernels, GPU busy fraction, launches      profile_cuda.json
#   concurrency  4 trainings at once on the one GPU against one alone, --threads auto and every
#                core: how many experiments one GPU takes at once                                 concurrency_cuda.json
#   accuracy     ucl, hucl (beta 1, tau+ 0.1), scl, hscl (beta 1) at the same epochs, fitted to
#                the time left, one after another; resumable: rerun with
#                --parts setup,accuracy and the same WORK to continue                             reproduce_four_samplers_cuda.json
#
# What a bare GPU machine without network needs carried to it (the device tool's `carry`: .carry/, which .gitignore
# ignores; benchmarks/device_carry.sh fills it on a machine with network, within the tool's 64 MiB with the tree):
#   .carry/cifar10-jpeg.tar.gz  ../shared/datasets/cifar10-jpeg.tar.gz (CIFAR-10 as JPEGs in train/ and test/ class folders)
#   .carry/hcl-image/           joshr17/HCL's image/ folder (main.py, model.py, utils.py), unmodified. The official code is
#                               never copied into this repository: the session that carries it puts it there.
#   .carry/wheels/              what `pip install -e '.[test]'` needs that the machine's image lacks (dvc and its
#                               dependencies, POT), as cp312 manylinux wheels
# The machine has Python 3.12 with torch, torchvision, torch-geometric, pytest, pytest-xdist and pandas; this script
# installs the carried wheels and hcl itself (pip, no index, no dependencies) before the parts.
#
# The call (the device tool; the 540 s budget includes the install, and timeout_s 600 leaves room for a last kill):
#   run(command="set -o pipefail; bash benchmarks/device_check.sh --results $OUT 2>&1 | tee $OUT/device_check.log",
#       carry=[".carry"], timeout_s=600)
# then copy the returned *_cuda.json into benchmarks/results/, commit them, and take the README's figures from them.
#
# Usage: benchmarks/device_check.sh [--smoke] [--results DIR] [--work DIR] [--budget SECONDS] [--parts setup,tests,...]
#   --smoke    the same path on a CPU in under 3 minutes: an archive of random images in CIFAR's layout, a small CNN,
#              batches of 16, two tests of tests/test_knn.py for the suite; results in WORK/results unless --results says.
#   The official part runs the code in $OFFICIAL_HCL_IMAGE (default .carry/hcl-image) and is skipped, saying so, without it.
# Exit status: 0 when every part that ran ended well, else 1 (the log names the parts).

set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CARRY=.carry
SMOKE=0
RESULTS=""
WORK=""
BUDGET=""
PARTS="setup,tests,throughput,official,profile,concurrency,accuracy"
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --results) RESULTS=$2; shift ;;
    --work) WORK=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --parts) PARTS=$2; shift ;;
    *) echo "device_check.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$SMOKE" = 1 ]; then
  WORK=${WORK:-${TMPDIR:-/tmp}/hcl-device-check-smoke}
  BUDGET=${BUDGET:-170}
  SIZE=(--smoke)
  BOXES=(setup=40 tests=40 throughput=60 official=40 profile=30 concurrency=60)
  export OMP_NUM_THREADS=1  # torch's default then: tiny models on a CPU shared with other jobs stall on more threads
else
  WORK=${WORK:-${TMPDIR:-/tmp}/hcl-device-check}
  BUDGET=${BUDGET:-540}
  SIZE=()
  BOXES=(setup=100 tests=150 throughput=170 official=75 profile=45 concurrency=90)
fi
RESULTS=${RESULTS:-$([ "$SMOKE" = 1 ] && echo "$WORK/results" || echo benchmarks/results)}
mkdir -p "$WORK" "$RESULTS"
WORK=$(cd "$WORK" && pwd)
RESULTS=$(cd "$RESULTS" && pwd)
export HCL_BENCHMARK_RESULTS=$RESULTS PYTHONUNBUFFERED=1
START=$(date +%s)
DEADLINE=$((START + BUDGET))
FAILED=()

box() {  # box NAME: the part's seconds, its own box capped by the time left (the accuracy runs get all that is left)
  local left want entry
  left=$((DEADLINE - $(date +%s)))
  want=$left
  for entry in "${BOXES[@]}"; do
    [ "${entry%%=*}" = "$1" ] && want=${entry#*=}
  done
  echo $((want < left ? want : left))
}

part() {  # part NAME COMMAND...: run COMMAND in NAME's time box, unless --parts leaves it out or no time is left; sets LAST_RC
  local name=$1 seconds began
  shift
  LAST_RC=""
  [[ ",$PARTS," == *",$name,"* ]] || return 0
  seconds=$(box "$name")
  if [ "$seconds" -lt 15 ]; then
    echo "== $name: skipped, $seconds s left"
    return 0
  fi
  echo "== $name (time box $seconds s, $(($(date +%s) - START)) s in)"
  began=$(date +%s)
  timeout -k 10 -s INT "$seconds" "$@"
  LAST_RC=$?
  echo "== $name: exit $LAST_RC after $(($(date +%s) - began)) s"
  [ "$LAST_RC" = 0 ] || FAILED+=("$name (exit $LAST_RC)")
  return 0
}

if [ -d "$CARRY/wheels" ]; then
  echo "== installing $(ls "$CARRY"/wheels/*.whl | wc -l) carried wheels"
  $PY -m pip install -q --no-index --no-deps --no-compile "$CARRY"/wheels/*.whl || FAILED+=("wheels")
fi
if ! command -v hcl >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-build-isolation -e . || FAILED+=("hcl install")
fi
DEVICE=$($PY -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
echo "== device $DEVICE, work $WORK, results $RESULTS, budget $BUDGET s"

if [ "$SMOKE" = 1 ]; then
  part setup $PY -m benchmarks.device_check setup --work "$WORK" --synthetic 64
else
  ARCHIVE=$CARRY/cifar10-jpeg.tar.gz
  [ -f "$ARCHIVE" ] || ARCHIVE=../shared/datasets/cifar10-jpeg.tar.gz
  part setup $PY -m benchmarks.device_check setup --work "$WORK" --archive "$ARCHIVE"
fi

TESTS=(tests)
XDIST=()
if [ "$SMOKE" = 1 ]; then
  TESTS=(tests/test_knn.py -k "cuda or single_nearest")
elif $PY -c "import xdist" 2>/dev/null; then
  XDIST=(-n 8 --dist loadfile)
fi
PYTEST=($PY -m pytest -q -p no:cacheprovider -rfE --junitxml="$WORK/junit.xml" "${XDIST[@]}"
  --deselect tests/test_benchmarks.py::test_the_device_check_runs_whole_on_a_cpu "${TESTS[@]}")
rm -f "$WORK/junit.xml"
TESTS_BEGAN=$(date +%s)
# the tests keep their own results folders (HCL_BENCHMARK_RESULTS would send their benchmarks' files to RESULTS)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} part tests env -u HCL_BENCHMARK_RESULTS "${PYTEST[@]}" >"$WORK/tests.log" 2>&1
grep "^== tests" "$WORK/tests.log"
if [ -n "$LAST_RC" ]; then
  tail -n 5 "$WORK/tests.log"
  $PY -m benchmarks.device_check tests-summary --junit "$WORK/junit.xml" --log "$WORK/tests.log" --exit-code "$LAST_RC" \
    --seconds $(($(date +%s) - TESTS_BEGAN)) --command "${PYTEST[*]}"
fi

part throughput $PY -m benchmarks.device_check throughput --work "$WORK" "${SIZE[@]}"

OFFICIAL=${OFFICIAL_HCL_IMAGE:-$CARRY/hcl-image}
if [ -f "$OFFICIAL/main.py" ]; then
  OFFICIAL_SIZE=()
  [ "$SMOKE" = 1 ] && OFFICIAL_SIZE=(--batch-size 16 --workers 1 --warmup 1)
  part official $PY -m benchmarks.official_hcl_image --code "$OFFICIAL" --prepared "$WORK/prepared" --cifar "$WORK/cifar" \
    --hcl-throughput "$RESULTS/throughput_$DEVICE.json" "${OFFICIAL_SIZE[@]}"
else
  echo "== official: skipped, no official code at $OFFICIAL (put joshr17/HCL's image/ folder there)"
fi

if [ "$SMOKE" = 1 ]; then
  part profile $PY -m benchmarks.device_check profile --work "$WORK" --steps 2 --smoke
  part concurrency $PY -m benchmarks.device_check concurrency --work "$WORK" --processes 2 --steps 2 --smoke
else
  part profile $PY -m benchmarks.device_check profile --work "$WORK"
  part concurrency $PY -m benchmarks.device_check concurrency --work "$WORK"
fi
part accuracy $PY -m benchmarks.device_check accuracy --work "$WORK" --seconds $((DEADLINE - $(date +%s) - 15)) "${SIZE[@]}"

echo "== done in $(($(date +%s) - START)) s; results in $RESULTS"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "== failed: ${FAILED[*]}"
  exit 1
fi
