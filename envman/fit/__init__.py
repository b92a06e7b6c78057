"""``envman fit``: will a training run fit a GPU, and if not, what to change.

Pure core: ``architectures`` (config → shapes and parameter counts), ``estimate`` (bytes of one training
step), ``advice`` (levers and what each saves). IO: ``catalog`` (models.yaml, gpu_perf.yaml, config.json),
``trace`` (optional measurement with PyTorch on data-less tensors).
"""
