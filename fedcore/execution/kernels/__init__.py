"""Compiled local training: a round of every site's MLP in C (`mlp_round.c`), site after site.

The torch batched path (`fedcore.execution.batched`, `fedcore.execution.stacked`) steps all sites together; on a CPU every step then
streams all sites' weights, gradients and momentum through memory and pays a few dozen
operations' overhead, so the matrix products run at about half their in-cache rate. The C round
trains one site's whole round at a time, with its tensors in the core's cache, and threads take
whole sites. It computes the same thing: the same batches, the same dropout masks (each site's
own PCG64 stream, which the C round steps itself, as numpy would), the same loss, SGD with
momentum, BatchNorm statistics; results equal the torch path's up to floating-point rounding.
`predict` runs the same network forward, in evaluation mode, for the every-round hold-out scores.

It serves algorithms whose local loss is the plain class-weighted NLL (`fedcore.execution.compiled`) on
the CPU in float32. The source is compiled on first use with the system's C compiler into a cache
(`FEDCORE_KERNEL_CACHE`, default ~/.cache/fedcore) and calls the BLAS that torch carries; where
either is missing, `unavailable()` says why and the engine trains with the torch path instead.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch

from fedcore.execution import stacked
from fedcore.models import MLP, min_batch_rows

SOURCE = Path(__file__).with_name("mlp_round.c")
FLAGS = ("-O3", "-march=native", "-fno-trapping-math", "-fno-math-errno", "-fopenmp", "-shared", "-fPIC", "-std=c11")
PREDICTION_ROWS = 64  # rows per forward pass in prediction (bigger products than training's batches)
KINDS = {"affine": 0, "dropout": 1, "linear": 2, "batch_norm": 3, "tanh": 4}  # stacked.spec's layer kinds

# The two structs the C round reads, described once: each field's name, its ctypes type and its C
# declaration (a count for arrays). ctypes' layout and the C header written at build time both come
# from these lists, so the two sides cannot disagree.
_LAYER_FIELDS = [
    ("kind", ctypes.c_int32, "int32_t"), ("inputs", ctypes.c_int32, "int32_t"),
    ("outputs", ctypes.c_int32, "int32_t"),
    ("mask_offset", ctypes.c_int32, "int32_t"),  # dropout: its first column in a row of a step's masks
    ("eps", ctypes.c_float, "float"), ("bn_momentum", ctypes.c_float, "float"),  # BatchNorm's
    ("size", ctypes.c_int64 * 2, "int64_t", 2),  # elements per site of its tensors (b, w) or (weight, bias)
    ("tensor", ctypes.c_void_p * 2, "float *", 2),  # site 0's; site s's start s * size later
    ("momentum", ctypes.c_void_p * 2, "float *", 2),  # NULL: not trained
    ("running_mean", ctypes.c_void_p, "float *"), ("running_var", ctypes.c_void_p, "float *"),
    ("tracked", ctypes.c_void_p, "int64_t *"),
]
_ROUND_FIELDS = [
    *((name, ctypes.c_int32, "int32_t") for name in (
        "sites", "layers", "classes", "batch", "max_steps", "mask_width", "rows_per_site", "features",
        "threads", "mean_reduction",
        "lowest",  # the lowest layer with a trained tensor
        "training")),  # 0: predict (no dropout, BatchNorm from running statistics)
    *((name, ctypes.c_float, "float") for name in ("lr", "momentum", "weight_decay", "keep_scale")),
    ("x", ctypes.c_void_p, "const float *"),  # [sites, rows_per_site, features]
    ("x_site_stride", ctypes.c_int64, "int64_t"),  # elements from one site's rows to the next's (0: the same rows)
    ("y", ctypes.c_void_p, "const int64_t *"),  # [sites, rows_per_site]
    ("rows", ctypes.c_void_p, "const int64_t *"),  # [sites, max_steps, batch] each step's rows
    ("counts", ctypes.c_void_p, "const int32_t *"),  # [sites, max_steps] real rows of each step (0: none);
    # predicting, [sites] rows of each site
    ("streams", ctypes.c_void_p, "uint64_t *"),  # [sites, 4] PCG64 dropout streams, advanced in place; NULL: none
    ("keep_below", ctypes.c_int32, "int32_t"),  # a 16-bit draw under this keeps a unit
    ("class_weights", ctypes.c_void_p, "const float *"),  # [sites, classes]; NULL: every row weighs 1
    ("sgemm", ctypes.c_void_p, "sgemm_t"),
    # MKL's MKL_Set_Num_Threads_Local, or NULL: each thread's products run on that thread alone
    ("blas_threads", ctypes.c_void_p, "blas_threads_t"),
    ("layer", ctypes.c_void_p, "Layer *"),
]


def _ctypes_fields(described: list[tuple]) -> list[tuple[str, type]]:
    return [(name, kind) for name, kind, *_ in described]


def _c_struct(name: str, described: list[tuple]) -> str:
    lines = []
    for field_name, _, c_type, *count in described:
        separator = "" if c_type.endswith("*") else " "
        lines.append(f"    {c_type}{separator}{field_name}{f'[{count[0]}]' if count else ''};")
    return "typedef struct {\n" + "\n".join(lines) + f"\n}} {name};\n"


def header() -> str:
    """mlp_round.h: what the C source declares from this module (written beside it at build time)."""
    kinds = ", ".join(f"{name.upper()} = {value}" for name, value in KINDS.items())
    return (f"enum {{ {kinds} }};\n" + _c_struct("Layer", _LAYER_FIELDS) + _c_struct("Round", _ROUND_FIELDS))


class _Layer(ctypes.Structure):
    _fields_ = _ctypes_fields(_LAYER_FIELDS)


class _Round(ctypes.Structure):
    _fields_ = _ctypes_fields(_ROUND_FIELDS)


def unavailable() -> str:
    """Why the compiled round cannot run here ('' when it can)."""
    return _library()[1]


@functools.lru_cache(maxsize=1)
def _library() -> tuple[ctypes.CDLL | None, str]:
    if not sys.platform.startswith("linux"):
        return None, "the compiled round is built for Linux only"
    sgemm, blas_threads = _torch_blas()
    if sgemm is None:
        return None, "this torch build exports no BLAS sgemm for the compiled round to call"
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None, "no C compiler (cc) to build the compiled round"
    try:
        path = _build(compiler)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"the compiled round did not build: {str(error).strip()[-300:]}"
    library = ctypes.CDLL(str(path))
    for function in (library.train_round, library.predict):
        function.argtypes = [ctypes.POINTER(_Round), ctypes.c_void_p]
        function.restype = ctypes.c_int
    library.sgemm, library.blas_threads = sgemm, blas_threads
    return library, ""


def _torch_blas() -> tuple[int | None, int | None]:
    """Addresses of the Fortran sgemm_ in torch's CPU library (MKL there) and of MKL's
    MKL_Set_Num_Threads_Local (None where the library has none), or (None, None)."""
    for name in ("libtorch_cpu.so", "libtorch.so"):
        path = Path(torch.__file__).parent / "lib" / name
        if path.exists():
            try:
                library = ctypes.CDLL(str(path))
                sgemm = ctypes.cast(library.sgemm_, ctypes.c_void_p).value
            except (OSError, AttributeError):
                continue
            setter = getattr(library, "MKL_Set_Num_Threads_Local", None)  # C: by value
            return sgemm, None if setter is None else ctypes.cast(setter, ctypes.c_void_p).value
    return None, None


def _build(compiler: str) -> Path:
    """The shared library, compiled once per source, compiler and CPU (-march=native) into the cache."""
    version = subprocess.run([compiler, "--version"], check=True, capture_output=True, text=True, timeout=60).stdout
    cpu = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    declarations = header()
    key = hashlib.sha256("\n".join([SOURCE.read_text(), declarations, version, " ".join(FLAGS), cpu]).encode()
                         ).hexdigest()[:16]
    cache = Path(os.environ.get("FEDCORE_KERNEL_CACHE", Path.home() / ".cache" / "fedcore"))
    target = cache / f"mlp_round-{key}.so"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as scratch:  # on the cache's disk: the rename is atomic
            built = Path(scratch) / target.name
            (Path(scratch) / "mlp_round.h").write_text(declarations)
            result = subprocess.run([compiler, *FLAGS, f"-I{scratch}", str(SOURCE), "-o", str(built), "-lm"],
                                    check=False, capture_output=True, text=True, timeout=300)
            if result.returncode != 0:
                raise subprocess.SubprocessError(result.stderr)
            os.replace(built, target)
    return target


def supports(state: Mapping[str, torch.Tensor]) -> bool:
    """Whether the compiled round can train these stacked tensors: float32 on the CPU (BatchNorm's
    counts int64), each one dense block with the sites first."""
    return all(
        tensor.device.type == "cpu" and tensor.is_contiguous()
        and tensor.dtype == (torch.int64 if name.endswith("num_batches_tracked") else torch.float32)
        for name, tensor in state.items()
    )


def _network(model: MLP, state: Mapping[str, torch.Tensor], features: int,
             momentum: Mapping[str, torch.Tensor] | None = None) -> tuple[ctypes.Array, int, int, int]:
    """The MLP's layers as the C round reads them, with pointers to site 0's rows of their stacked
    tensors (and of the `momentum` of the trained ones); also the number of classes, the lowest
    layer with a trained tensor and the width of a row of a step's dropout masks."""
    layers_spec = stacked.spec(model).layers
    layers, width, offset, lowest = (_Layer * len(layers_spec))(), features, 0, len(layers_spec)
    for index, (layer, slot) in enumerate(zip(layers_spec, layers)):
        slot.kind, slot.inputs, slot.eps, slot.bn_momentum = KINDS[layer.kind], width, layer.eps, layer.momentum
        if layer.kind == "linear":
            width = state[layer.tensors[0]].shape[1]
        slot.outputs = width
        if layer.kind == "dropout":
            slot.mask_offset, offset = offset, offset + layer.width
        for k, name in enumerate(layer.tensors):
            slot.size[k] = state[name][0].numel()
            slot.tensor[k] = state[name].data_ptr()
            if momentum is not None and name in momentum:
                slot.momentum[k] = momentum[name].data_ptr()
                lowest = min(lowest, index)
        if layer.kind == "batch_norm":
            slot.running_mean, slot.running_var, slot.tracked = (
                state[f"{layer.name}.{buffer}"].data_ptr() for buffer in ("running_mean", "running_var", "num_batches_tracked"))
    return layers, width, lowest, offset


def _call(function: str, run: _Round, out: torch.Tensor) -> None:
    library, why = _library()
    if library is None:
        raise RuntimeError(why)
    run.sgemm, run.blas_threads = library.sgemm, library.blas_threads
    if getattr(library, function)(ctypes.byref(run), out.data_ptr()) != 0:
        raise MemoryError("the compiled round could not allocate its workspace")


def train_round(
    model: MLP,
    state: Mapping[str, torch.Tensor],
    optimizer: stacked.SiteSGD,
    data: tuple[torch.Tensor, torch.Tensor],
    orders: list[list[torch.Tensor]],
    class_weights: torch.Tensor | None,
    reduction: str,
    dropout: stacked.DropoutMasks,
    batch_size: int,
    lr: float,
) -> torch.Tensor:
    """One round of local training for all sites, as `stacked.train_round` with the plain NLL
    step computes it; returns each site's mean loss per batch."""
    spec = stacked.spec(model)
    x, y = (part.contiguous() for part in data)
    n_sites = x.shape[0]
    plan = stacked.batch_plan(orders, batch_size, min_batch_rows(model), x.device)
    by_site = torch.argsort(plan.order)
    rows = plan.rows.permute(1, 0, 2)[by_site].contiguous()  # [sites, steps, batch]
    counts = plan.valid.sum(-1).T[by_site].to(torch.int32).contiguous()  # [sites, steps]
    streams = dropout.stream_states() if spec.dropout > 0 else None
    optimizer.arrange(torch.arange(n_sites))  # this round goes in site order, and so does the momentum
    momentum = optimizer.buffers or {name: torch.zeros_like(p) for name, p in optimizer.parameters.items()}
    weights = None if class_weights is None else class_weights.to(torch.float32).contiguous()
    layers, classes, lowest, mask_width = _network(model, state, x.shape[2], momentum)
    run = _Round(
        sites=n_sites, layers=len(layers), classes=classes, batch=batch_size, max_steps=rows.shape[1],
        mask_width=mask_width, rows_per_site=x.shape[1], features=x.shape[2], threads=_threads(n_sites),
        mean_reduction=reduction == "mean", lowest=lowest, training=1,
        lr=lr, momentum=optimizer.momentum, weight_decay=optimizer.weight_decay, keep_scale=dropout.keep_scale(spec.dropout),
        x=x.data_ptr(), x_site_stride=x.stride(0), y=y.data_ptr(), rows=rows.data_ptr(), counts=counts.data_ptr(),
        streams=None if streams is None else streams.ctypes.data, keep_below=dropout.keep_below(spec.dropout),
        class_weights=None if weights is None else weights.data_ptr(), layer=ctypes.addressof(layers),
    )
    losses = torch.zeros(n_sites, dtype=torch.float32)
    _call("train_round", run, losses)
    if streams is not None:
        dropout.set_stream_states(streams)
    return losses / (counts > 0).sum(1).clamp(min=1)


def predict(model: MLP, state: Mapping[str, torch.Tensor], x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Every site's log-probabilities [sites, rows, classes] on its rows x [sites, rows, D] (a view
    with the same rows for every site too), as `stacked.forward` in evaluation computes them; only
    each site's first rows[site] rows are computed (the others are 0)."""
    x = x if x.stride(2) == 1 and x.stride(1) == x.shape[2] else x.contiguous()
    counts = rows.to(torch.int32).contiguous()
    layers, classes, _, _ = _network(model, state, x.shape[2])
    run = _Round(
        sites=x.shape[0], layers=len(layers), classes=classes, batch=PREDICTION_ROWS, rows_per_site=x.shape[1],
        features=x.shape[2], threads=_threads(x.shape[0]), training=0, x=x.data_ptr(), x_site_stride=x.stride(0),
        counts=counts.data_ptr(), layer=ctypes.addressof(layers),
    )
    log_prob = torch.zeros(x.shape[0], x.shape[1], classes, dtype=torch.float32)
    _call("predict", run, log_prob)
    return log_prob


def _threads(n_sites: int) -> int:
    return max(1, min(torch.get_num_threads(), n_sites))
