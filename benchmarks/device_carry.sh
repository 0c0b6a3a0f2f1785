#!/usr/bin/env bash
# Fill .carry/ (git-ignored) with what benchmarks/device_check.sh needs on a bare GPU machine without network; run it
# from the repository root on a machine with network, before the device tool's run call that carries .carry/:
#
#   .carry/cifar10-jpeg.tar.gz  copied from ../shared/datasets (or $CIFAR_ARCHIVE)
#   .carry/hcl-image/           joshr17/HCL's image/ folder, unmodified: from $HCL_IMAGE_CODE if set (a folder holding
#                               main.py, model.py and utils.py), else cloned from GitHub where it can be reached (else
#                               left out, and the check skips its official part). It is other people's code: it stays
#                               in .carry/ and never enters this repository.
#   .carry/wheels/              the wheels (CPython 3.12, manylinux x86_64) that `pip install -e '.[test]'` needs beyond the
#                               GPU machine's image: dvc with its dependencies resolved by pip for that platform under
#                               constraints.txt, and POT, less every project the image already holds
#                               (PRESENT below: the image's package list as the device tool's notes give it, 2026-11-17).
#
# The device tool carries at most 64 MiB with the working tree: the script prints what .carry/ weighs.

set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=.carry
PRESENT="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit
cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist
fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig
interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy
numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile
nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink
nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx
optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache
protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark
pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu
safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision
tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt
xarray xxhash yarl zipp"

mkdir -p "$CARRY"
cp "${CIFAR_ARCHIVE:-../shared/datasets/cifar10-jpeg.tar.gz}" "$CARRY/cifar10-jpeg.tar.gz"

if [ ! -f "$CARRY/hcl-image/main.py" ]; then
  if [ -n "${HCL_IMAGE_CODE:-}" ]; then
    mkdir -p "$CARRY/hcl-image"
    cp "$HCL_IMAGE_CODE"/main.py "$HCL_IMAGE_CODE"/model.py "$HCL_IMAGE_CODE"/utils.py "$CARRY/hcl-image/"
  elif git clone -q --depth 1 https://github.com/joshr17/HCL "$CARRY/hcl-repository" 2>/dev/null; then
    cp -r "$CARRY/hcl-repository/image" "$CARRY/hcl-image"
    rm -rf "$CARRY/hcl-repository"
  else
    rm -rf "$CARRY/hcl-repository"
    echo "no official image code: GitHub cannot be reached and HCL_IMAGE_CODE is unset; the official part will be skipped"
  fi
fi

rm -rf "$CARRY/wheels" "$CARRY/wheels.all"
DOWNLOAD=(python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64
  -d "$CARRY/wheels.all")
# hydra-core (through dvc) needs antlr4-python3-runtime 4.9.3, published only as source: built here as the pure-Python
# wheel it makes, then found by the download beside the registry's wheels
python3 -m pip wheel -q --no-deps -w "$CARRY/wheels.all" antlr4-python3-runtime==4.9.3
"${DOWNLOAD[@]}" -c constraints.txt --find-links "$CARRY/wheels.all" dvc
# POT without constraints.txt's pin: 0.9.7's wheel weighs 33 MB, over half the tool's 64 MiB, while 0.9.6's weighs 1.5 MB
# and has the API the tests compare against (ot.sinkhorn, ot.emd); its other needs (numpy, scipy) are on the image
"${DOWNLOAD[@]}" --no-deps POT==0.9.6.post1
mkdir -p "$CARRY/wheels"
for wheel in "$CARRY"/wheels.all/*.whl; do
  project=$(basename "$wheel" | cut -d- -f1 | tr '[:upper:]_.' '[:lower:]--')
  [[ " $(echo $PRESENT) " == *" $project "* ]] || mv "$wheel" "$CARRY/wheels/"
done
rm -rf "$CARRY/wheels.all"
echo "$(ls "$CARRY"/wheels | wc -l) wheels; .carry/ weighs $(du -sh "$CARRY" | cut -f1) (the device tool carries 64 MiB with the tree)"
