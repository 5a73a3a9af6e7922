# Sourced on the GPU machine from the project root (bench/gpu/README.md): assembles ONNX
# Runtime's CUDA build in /tmp/ort from the parts stashed in /tmp/stash and the last one in
# .gpu/parts/, the CLI as /tmp/stemflow, the Python packages in /tmp/site and MSST in /tmp/msst,
# and exports STEMFLOW_ORT_LIB, LD_LIBRARY_PATH (CUDA 13, cuDNN 9 from PyTorch's venv), SF, PY,
# PYTHONPATH and MSST.
_ort=/tmp/ort; mkdir -p "$_ort" /tmp/stash /tmp/site /tmp/msst
if [ ! -s "$_ort/libonnxruntime_providers_cuda.so" ]; then
  for _p in .gpu/parts/cuda.xz.*; do [ -e "$_p" ] && cp "$_p" /tmp/stash/; done
  cat $(ls /tmp/stash/cuda.xz.* | sort) | xz -dc > "$_ort/libonnxruntime_providers_cuda.so" || return 1
fi
_name=$(cat .gpu/run/ort.name 2>/dev/null || echo libonnxruntime.so.1)
xz -dc .gpu/run/ort.xz > "$_ort/$_name" && { [ "$_name" = libonnxruntime.so ] || ln -sf "$_name" "$_ort/libonnxruntime.so"; }
cp .gpu/run/libonnxruntime_providers_shared.so "$_ort/"
xz -dc .gpu/run/stemflow.xz > /tmp/stemflow && chmod +x /tmp/stemflow
tar -xzf .gpu/run/pydeps.tgz -C /tmp/site
tar -xzf .gpu/run/msst.tgz -C /tmp/msst
PY=${PY:-/opt/torch/.venv/bin/python}
_sp=$("$PY" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
export LD_LIBRARY_PATH="$(find "$_sp/nvidia" -name 'lib*.so*' -printf '%h\n' | sort -u | tr '\n' ':')$_sp/torch/lib:${LD_LIBRARY_PATH:-}"
export STEMFLOW_ORT_LIB=$_ort SF=/tmp/stemflow PY PYTHONPATH=/tmp/site MSST=/tmp/msst
echo "ONNX Runtime CUDA build in $_ort ($(du -sh "$_ort" | cut -f1)); CLI at \$SF; Python \$PY"
