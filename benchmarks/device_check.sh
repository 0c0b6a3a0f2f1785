#!/usr/bin/env bash
# The whole GPU check (issues 28 and 43) as one command: at most 8 minutes on one H100, the install included, each part
# in its own time box (the boxes add up to the budget less INSTALL_SECONDS; `--plan` prints them and fails otherwise),
# each writing RESULTS/PART_cuda.json as it goes: after every row, and a failing row or part leaves the others' results
# (the environment first: "device": "cuda", the GPU's name, torch, the date and the command; benchmarks/common.py).
# The parts (benchmarks/device_check.py, benchmarks/official_hcl_image.py), in the order they run:
#
#   setup        CIFAR-10 extracted from its JPEG archive and prepared (hcl prepare --dataset imagefolder) in WORK
#   table        (only where --parts names it, and in --smoke) the next missing (row, seed) runs of the committed image
#                table's record, every sampler at one recipe (benchmarks/device_table.py: ResNet-18, B 512, bf16, 200
#                epochs), each written as it ends, joined into the record; it gets the time the other parts leave.
#                --plan lists the runs its box holds. A loan runs it first, alone:
#                  run(command="set -o pipefail; export HCL_COMMIT=SHA; bash benchmarks/device_check.sh --parts setup,table
#                       --budget 560 --results $OUT 2>&1 | tee $OUT/device_check.log", carry=[".carry"], timeout_s=600)
#                then copy $OUT/table_images_cifar10.json over benchmarks/results/'s and commit it    table_images_cifar10.json
#   compile      the SimCLR step (ResNet-18 B=512 bf16) compiled whole, CUDA graphs, 5 steps under
#                TORCH_LOGS=recompiles,graph_breaks,cudagraphs, against 5 eager steps: losses, breaks, recompiles  compile_cuda.json
#   syncs        the host syncs CUDA's sync debug mode reports in 3 steps of every sampler and queue mode (small CNN,
#                fp32 and bf16), and the compiled ucl and hucl steps' losses beside eager ones (benchmarks/cuda_syncs.py) syncs_cuda.json
#   throughput   one epoch of the product's loop per setting: ResNet-18 B=512 bf16 for every
#                sampler, ResNet-50 B=256 bf16 and fp32, fp32, --compile; a failed row keeps its error   throughput_cuda.json
#   profile      torch.profiler over 5 steps of ucl: top kernels, GPU busy fraction, launches, and every
#                device-to-host read (_local_scalar_dense, nonzero, copies to the host, synchronising
#                calls) with the lines that made them (torch.cuda.set_sync_debug_mode)               profile_cuda.json
#   tests        the tests that need CUDA (-k cuda over the files naming it), pytest-xdist if there  tests_cuda.json
#   concurrency  4 trainings at once on the one GPU against one alone, --threads auto and every
#                core: how many experiments one GPU takes at once                                 concurrency_cuda.json
#   official     HCL's official image code: one epoch of its own train(), unmodified, on CIFAR-10
#                rebuilt in its pickled layout (only where carried; no box of its own: what is left) official_hcl_image_cuda.json
#   accuracy     ucl, hucl (beta 1, tau+ 0.1), scl, hscl (beta 1) at the same epochs, fitted to
#                the time left, one after another; resumable: rerun with
#                --parts setup,accuracy and the same WORK to continue                             reproduce_four_samplers_cuda.json
#
# What a bare GPU machine without network needs carried to it (the device tool's `carry`: .carry/, which .gitignore
# ignores; benchmarks/device_carry.sh fills it on a machine with network, within the tool's 64 MiB with the tree):
#   .carry/cifar10-jpeg.tar.gz  ../shared/datasets/cifar10-jpeg.tar.gz (CIFAR-10 as JPEGs in train/ and test/ class folders)
#   .carry/hcl-image/           joshr17/HCL's image/ folder (main.py, model.py, utils.py), unmodified, where it can be had.
#                               The official code is never copied into this repository: the session that carries it puts it there.
#   .carry/wheels/              what `pip install -e '.[test]'` needs that the machine's image lacks (dvc and its
#                               dependencies, POT), as cp312 manylinux wheels
# The machine has Python 3.12 with torch, torchvision, torch-geometric, pytest, pytest-xdist and pandas; this script
# installs the carried wheels and hcl itself (pip, no index, no dependencies) before the parts.
#
# The call (the device tool; the 480 s budget includes the install; timeout_s 540 leaves room for the last kill, and the
# session's 15 minutes of device time for the machine's start):
#   run(command="set -o pipefail; export HCL_COMMIT=SHA; bash benchmarks/device_check.sh --results $OUT 2>&1 | tee $OUT/device_check.log",
#       carry=[".carry"], timeout_s=540)
# with SHA the commit sent, all of the tree committed (the copy's own .git can name another: benchmarks/common.py).
# then copy the returned *_cuda.json into benchmarks/results/, commit them, and take the README's figures from them.
#
# Usage: benchmarks/device_check.sh [--smoke] [--plan] [--results DIR] [--work DIR] [--budget SECONDS] [--parts setup,tests,...]
#   --smoke    the same path on a CPU in about 5 minutes: an archive of random images in CIFAR's layout, a small CNN,
#              batches of 16, two tests of tests/test_knn.py for the suite; results in WORK/results unless --results says.
#   --plan     print the time boxes and exit: 0 when they fit the budget less INSTALL_SECONDS, else 2. A --budget over
#              the default widens every box in proportion (a loaded CPU's smoke run).
#   HCL_DEVICE_CHECK_FAIL=PART[:ROW],...  makes those parts (or rows) fail on purpose (tests/test_benchmarks.py).
#   The official part runs the code in $OFFICIAL_HCL_IMAGE (default .carry/hcl-image) and is skipped, saying so, without it.
# Exit status: 0 when every part that ran ended well, else 1 (the log names the parts); 2 for a wrong argument or plan.

set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CARRY=.carry
SMOKE=0
RESULTS=""
WORK=""
BUDGET=""
PARTS="setup,compile,syncs,throughput,profile,tests,concurrency,official,accuracy"
PLAN=0
PARTS_GIVEN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --plan) PLAN=1 ;;
    --results) RESULTS=$2; shift ;;
    --work) WORK=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --parts) PARTS=$2; PARTS_GIVEN=1; shift ;;
    *) echo "device_check.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$SMOKE" = 1 ]; then
  WORK=${WORK:-${TMPDIR:-/tmp}/hcl-device-check-smoke}
  DEFAULT_BUDGET=360
  SIZE=(--smoke)
  INSTALL_SECONDS=20
  BOXES=(setup=20 table=60 compile=90 syncs=35 throughput=40 profile=15 tests=30 concurrency=25 official=20)
  [ -z "$PARTS_GIVEN" ] && PARTS="setup,table,${PARTS#setup,}"
  export OMP_NUM_THREADS=1  # torch's default then: tiny models on a CPU shared with other jobs stall on more threads
else
  WORK=${WORK:-${TMPDIR:-/tmp}/hcl-device-check}
  DEFAULT_BUDGET=480
  SIZE=()
  INSTALL_SECONDS=40
  BOXES=(setup=50 compile=100 syncs=70 throughput=100 profile=30 tests=45 concurrency=40)
fi
BUDGET=${BUDGET:-$DEFAULT_BUDGET}
if [ "$BUDGET" -gt "$DEFAULT_BUDGET" ]; then  # a wider budget widens every box and the install's share alike
  for index in "${!BOXES[@]}"; do
    entry=${BOXES[$index]}
    BOXES[$index]=${entry%%=*}=$((${entry#*=} * BUDGET / DEFAULT_BUDGET))
  done
  INSTALL_SECONDS=$((INSTALL_SECONDS * BUDGET / DEFAULT_BUDGET))
fi
BOXED=0  # the boxes of the parts that run
for entry in "${BOXES[@]}"; do
  [[ ",$PARTS," == *",${entry%%=*},"* ]] && BOXED=$((BOXED + ${entry#*=}))
done
if [ "$PLAN" = 1 ] || [ $((BOXED + INSTALL_SECONDS)) -gt "$BUDGET" ]; then
  echo "time boxes: ${BOXES[*]} (sum $BOXED s) + install $INSTALL_SECONDS s against a budget of $BUDGET s; official and accuracy get what is left"
  if [ $((BOXED + INSTALL_SECONDS)) -gt "$BUDGET" ]; then
    echo "device_check.sh: the time boxes do not fit the budget" >&2
    exit 2
  fi
  if [[ ",$PARTS," == *",table,"* ]]; then  # the table's box: its own in --smoke, else what the other parts leave
    TABLE_BOX=$((BUDGET - INSTALL_SECONDS - BOXED))
    for entry in "${BOXES[@]}"; do
      [ "${entry%%=*}" = table ] && TABLE_BOX=${entry#*=}
    done
    $PY -m benchmarks.device_table plan --seconds "$TABLE_BOX" "${SIZE[@]}" || exit 2
  fi
  exit 0
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

if [ -d "$CARRY/wheels" ] && [ "$SMOKE" = 0 ]; then  # the carried wheels are the GPU machine's (CPython 3.12), not this one's
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

TABLE_SIZE=()
[ "$SMOKE" = 1 ] && TABLE_SIZE=(--smoke)
part table $PY -m benchmarks.device_table run --work "$WORK" --seconds "$(box table)" "${TABLE_SIZE[@]}"

COMPILE_STEPS=()
[ "$SMOKE" = 1 ] && COMPILE_STEPS=(--steps 2)  # the first compiles, the second shows whether it compiles again
part compile $PY -m benchmarks.device_check compile --work "$WORK" "${SIZE[@]}" "${COMPILE_STEPS[@]}"
if [ "$SMOKE" = 1 ]; then  # on a CPU nothing reports syncs: the smoke run tries the part's path on two settings
  HCL_SYNC_DEVICE=cpu part syncs $PY -m benchmarks.cuda_syncs --settings ucl,hucl@queue --compiled ""
else
  part syncs $PY -m benchmarks.cuda_syncs
fi
part throughput $PY -m benchmarks.device_check throughput --work "$WORK" "${SIZE[@]}"

if [ "$SMOKE" = 1 ]; then
  part profile $PY -m benchmarks.device_check profile --work "$WORK" --steps 2 --smoke
else
  part profile $PY -m benchmarks.device_check profile --work "$WORK"
fi
mapfile -t TESTS < <(grep -l cuda tests/test_*.py)
XDIST=()
if [ "$SMOKE" = 1 ]; then
  TESTS=(tests/test_knn.py -k "cuda or single_nearest")
else
  TESTS+=(-k cuda)  # the tests that need CUDA (CI runs the rest on a CPU)
  $PY -c "import xdist" 2>/dev/null && XDIST=(-n 4 --dist loadfile)
fi
PYTEST=($PY -m pytest -q -p no:cacheprovider -rfE --junitxml="$WORK/junit.xml" "${XDIST[@]}"
  --deselect tests/test_benchmarks.py::test_the_device_check_runs_whole_on_a_cpu_and_keeps_what_a_failure_leaves "${TESTS[@]}")
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

if [ "$SMOKE" = 1 ]; then
  part concurrency $PY -m benchmarks.device_check concurrency --work "$WORK" --processes 2 --steps 2 --smoke
else
  part concurrency $PY -m benchmarks.device_check concurrency --work "$WORK"
fi
OFFICIAL=${OFFICIAL_HCL_IMAGE:-$CARRY/hcl-image}
if [ -f "$OFFICIAL/main.py" ]; then
  OFFICIAL_SIZE=()
  [ "$SMOKE" = 1 ] && OFFICIAL_SIZE=(--batch-size 16 --workers 1 --warmup 1)
  part official $PY -m benchmarks.official_hcl_image --code "$OFFICIAL" --prepared "$WORK/prepared" --cifar "$WORK/cifar" \
    --hcl-throughput "$RESULTS/throughput_$DEVICE.json" "${OFFICIAL_SIZE[@]}"
else
  echo "== official: skipped, no official code at $OFFICIAL (put joshr17/HCL's image/ folder there)"
fi

part accuracy $PY -m benchmarks.device_check accuracy --work "$WORK" --seconds $((DEADLINE - $(date +%s) - 15)) "${SIZE[@]}"

echo "== done in $(($(date +%s) - START)) s; results in $RESULTS"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "== failed: ${FAILED[*]}"
  exit 1
fi
