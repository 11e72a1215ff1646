"""word2vec's training engines behind one interface (:class:`~embedlab.engines.base.Engine`),
and the registry that says which are usable here and builds them by name.

* ``native``: ``_kernel.c``, the fused step in C, built on first use
  (:mod:`embedlab.engines.native`); NumPy only;
* ``torch``: PyTorch operations that read like the paper (:mod:`embedlab.engines.torch`, and
  :mod:`embedlab.engines.torch_hs` for hierarchical softmax), the reference the native engine
  agrees with to float32 rounding;
* ``cuda``: Triton kernels on one GPU (:mod:`embedlab.engines.cuda`); negative sampling and NCE.

Choosing an engine imports only that engine's module: the native engine never imports torch,
and the torch and cuda engines import it through :func:`embedlab.errors.import_torch`, so a
missing torch is one line naming the extra. ``--device`` is a second spelling of the choice
(:func:`requested_engine`); :func:`choose_engine` turns a request into the engine that trains.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

    from embedlab.config import TrainConfig
    from embedlab.data.noise import NoiseDistribution
    from embedlab.engines.base import Engine
    from embedlab.engines.huffman import HuffmanTree
    from embedlab.engines.params import Word2VecParams
    from embedlab.engines.step import StepConfig

#: Bumped whenever the arithmetic of a training step changes, so that a run resumed by another
#: revision says its result will differ from an uninterrupted run (recorded in ``RUN/env.json``).
#: 1: Gauss–Newton damping, κ = 8 at batch 2048, S = K·(window+1) shared noise words.
#: 2: damping by |∂L/∂s|, κ = 16 at batch 2048, S = ⌈4/3·K·(window+1)⌉.
#: 3: the native kernel sums each noise score over d in ascending order (no horizontal sums):
#:    same mathematics, different float32 rounding.
#: 4: CBOW's word2vec update, NCE damping without the bias on input rows, lr where a batch starts.
#: 5: negative sampling skips a noise word equal to the positive's target (word2vec's rule).
#: 6: batches from the batch specification (docs/batches.md): Philox-4x32-10 at counters made
#:    of positions; the native engine builds them in C. Runs started before keep their batches.
#: 7: the cuda engine sums a tile's scores over slices of 16 dimensions, in programs of 8 warps
#:    (float32 rounding; the other engines' arithmetic is revision 6's).
STEP_REVISION = 7
#: the first revision whose batches follow the batch specification
BATCH_SPEC_REVISION = 6
STEP_CHANGES = {2: "damping by |dL/ds| instead of Gauss-Newton, kappa 16, 40 shared noise words",
                3: "native noise scores summed in another order (float32 rounding differs)",
                4: "CBOW passes each context word the whole hidden gradient (word2vec's rule); "
                   "NCE damping no longer adds the bias term to input rows; each step's "
                   "learning rate is the schedule's value where the batch starts",
                5: "negative sampling skips a shared noise word that equals the target of a "
                   "positive pair, as word2vec.c and gensim skip such a draw",
                6: "batches drawn by the batch specification (counter-based Philox) instead of "
                   "NumPy generators per chunk",
                7: "the cuda engine's scores summed over slices of 16 dimensions (float32 "
                   "rounding differs)"}
#: the revisions that changed the arithmetic of some engines only (the others: every engine)
STEP_CHANGE_ENGINES = {3: frozenset({"native"}), 7: frozenset({"cuda"})}
#: the revisions that changed the arithmetic of some losses only (the others: every loss):
#: hierarchical softmax draws no noise words
STEP_CHANGE_LOSSES = {2: frozenset({"neg", "nce"}), 3: frozenset({"neg", "nce"}),
                      5: frozenset({"neg"})}

#: iterations a waiting OpenMP thread spins before it sleeps (see limit_openmp_spinning)
OPENMP_SPINCOUNT = "2000"


def limit_openmp_spinning() -> None:
    """Let a thread that waits at an OpenMP barrier sleep after a short spin.

    libgomp's default spins ~300,000 iterations first. The native kernel meets several barriers
    per step, and its threads share the cores with whatever else runs on the machine (and,
    between calls, with the training loop's own Python): a spinning thread holds a core the
    thread it waits for needs. Measured (1-epoch gcide8, 2 cores, 2 threads) with one other busy
    process: 7.9-8.2 s of training with the default spin, 4.9-5.2 s with 2,000 (4.5-4.7 s with
    200, 4.8-4.9 s with none); on the quiet machine 2,000 was no slower than the default (best
    of 5: 2.50 against 2.57 s) while 200 was (2.69 s): a short spin still catches a partner that
    arrives within microseconds. The variables are read once, when libgomp loads (with the
    native kernel, or with torch), so this runs before either is loaded: first thing in the
    ``embedlab`` command and in ``embedlab.train``; a user's own OMP_WAIT_POLICY or
    GOMP_SPINCOUNT is left alone. It does not change any result: only how threads wait.
    """
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = OPENMP_SPINCOUNT


#: engine name -> its class in module embedlab.engines.<name>
_CLASSES = {"torch": "TorchEngine", "native": "NativeEngine",  # native: engines/_kernel.c
            "cuda": "CudaEngine"}
ENGINES = tuple(_CLASSES)
#: the engines that train on the CPU
CPU_ENGINES = ("native", "torch")
#: the losses the cuda engine trains (hierarchical softmax trains on a CPU engine)
CUDA_LOSSES = ("neg", "nce")
#: the values of ``--device``, a second spelling of ``--engine`` (see :func:`requested_engine`)
DEVICES = ("auto", "cpu", "cuda")
#: the request ``--device cpu`` makes: a CPU engine, chosen as ``auto`` chooses one without a GPU
CPU_REQUEST = "cpu"
#: what ``TrainConfig.engine`` holds before :func:`choose_engine` resolves it
REQUESTS = ("auto", CPU_REQUEST, *ENGINES)


def _check_name(name: str) -> None:
    if name not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {name!r}")


def unavailable_reason(name: str) -> str | None:
    """None when engine ``name`` can train here, else why not (one line).

    The native engine needs its kernel built (a C compiler, a usable cache folder); the cuda
    engine torch with CUDA, triton and a GPU (:mod:`embedlab.engines.cuda`); the torch engine is
    always offered, and says what to install when it is imported without torch.
    """
    _check_name(name)
    if name == "native":
        from embedlab.engines import native

        return native.unavailable_reason()  # cached: asking again is free
    if name == "cuda":
        from embedlab.engines import cuda

        return cuda.unavailable_reason()  # cached too
    return None


def install_hint(name: str, reason: str, *, cpu_engine: str = "native") -> str:
    """What fixes the ``reason`` :func:`unavailable_reason` gave for engine ``name``
    (``cpu_engine``: the CPU engine the cuda engine's hint names instead)."""
    _check_name(name)
    if name == "native":
        from embedlab.engines import native

        return native.install_hint(reason)
    if name == "cuda":
        from embedlab.engines import cuda

        return cuda.install_hint(reason, cpu_engine)
    return "install it with pip install 'embedlab[torch]'"


def cuda_device_found() -> bool:
    """Whether ``--engine auto`` may train on a GPU here: an NVIDIA driver is loaded and the cuda
    engine can train. The driver is looked for first, so that a machine without one never
    imports torch to be told so; Triton's interpreter (tests) never counts as a GPU."""
    from embedlab.engines import cuda

    return cuda.gpu_present() and not cuda.interpreted() and cuda.unavailable_reason() is None


def cpu_choice() -> str:
    """The engine ``--device cpu`` trains with: native where its kernel builds, else torch."""
    return "native" if unavailable_reason("native") is None else "torch"


def auto_choice(*, loss: str = "neg") -> str:
    """The engine ``--engine auto`` trains with: cuda where a GPU is found and it trains
    ``loss``, else :func:`cpu_choice`."""
    return "cuda" if loss in CUDA_LOSSES and cuda_device_found() else cpu_choice()


def training_device(name: str) -> str:
    """What engine ``name`` trains on here, as ``RUN/env.json`` records it: the GPU's model for
    the cuda engine, ``cpu`` for the others."""
    if name != "cuda":
        return "cpu"
    from embedlab.engines import cuda

    return cuda.device_name()


def requested_engine(engine: str | None, device: str | None) -> str | None:
    """The engine request that ``--engine`` and ``--device`` make together (None: neither).

    ``--device cuda`` is ``--engine cuda``; ``--device cpu`` asks for a CPU engine
    (:data:`CPU_REQUEST`: native where it builds, else torch; a resumed run keeps its own);
    ``--device auto`` asks for nothing. Given both, they must agree.
    """
    from embedlab.errors import InputError, spell

    if device is not None and device not in DEVICES:
        raise InputError(f"{spell('--device')} must be auto, cpu or cuda, got {device!r}")
    if engine == CPU_REQUEST:  # a device, not an engine: the command line has no --engine cpu
        raise InputError(f"{spell('--engine', engine)} is not an engine; pass "
                         f"{spell('--device', 'cpu')} (native where it builds, else torch)")
    if device is None or device == "auto":
        return engine
    if engine not in (None, "auto", device) and not (device == "cpu" and engine in CPU_ENGINES):
        raise InputError(f"{spell('--device', device)} and {spell('--engine', engine)} "
                         f"contradict each other; pass one of them ({spell('--device', 'cuda')} "
                         f"is {spell('--engine', 'cuda')}, {spell('--device', 'cpu')} is "
                         f"{spell('--engine', 'native')} or {spell('--engine', 'torch')})")
    if device == "cuda":
        return "cuda"
    return engine if engine in CPU_ENGINES else CPU_REQUEST


#: whether the engine was asked for as a device (``--device cuda`` without ``--engine``)
_AS_DEVICE: contextvars.ContextVar[bool] = contextvars.ContextVar("embedlab_as_device",
                                                                 default=False)


@contextlib.contextmanager
def asked_as_device(yes: bool) -> Iterator[None]:
    """Within the block, a refusal of the cuda engine names ``--device cuda``, as asked."""
    token = _AS_DEVICE.set(yes)
    try:
        yield
    finally:
        _AS_DEVICE.reset(token)


def asked_for_device() -> bool:
    """Whether the cuda engine was asked for as ``--device cuda`` (``device='cuda'``): a refusal
    then names the device, as asked, and ``--device cpu`` as its fix."""
    return _AS_DEVICE.get()


def choose_engine(requested: str, *, loss: str, say: bool = True, micro: bool = False) -> str:
    """The engine that trains for ``requested`` (an engine, ``auto`` or :data:`CPU_REQUEST`), or
    an :class:`~embedlab.errors.InputError` naming why it cannot train here and the fix.

    ``auto`` is the GPU's cuda engine where one is found (not for hierarchical softmax), else
    what ``cpu`` is: native where its kernel builds, else torch. ``say``: print a note when that
    choice is not the plain one (the GPU, or torch for want of the native kernel). ``micro``:
    the run trains micro-batches, which the native engine does not: ``auto`` is then the GPU's
    cuda engine or torch, and the CPU engine a refusal points to is torch.
    """
    from embedlab.errors import InputError, spell

    if requested == "auto" and cuda_device_found():
        if loss in CUDA_LOSSES:
            if say:
                _note(f"training on {training_device('cuda')} with the cuda engine "
                      f"({spell('--device', 'cpu')} trains on the CPU)")
            return "cuda"
        if say:
            _note(f"{spell('--loss', loss)} trains on the CPU (the cuda engine trains negative "
                  "sampling and NCE)")
    if requested in ("auto", CPU_REQUEST) and micro:
        return "torch"  # of the CPU engines, the one that trains micro-batches
    if requested in ("auto", CPU_REQUEST, "native"):
        reason = unavailable_reason("native")  # cached: asking again is free
        if reason is None:
            return "native"
        if requested == "native":
            raise InputError(f"{spell('--engine', 'native')} is unavailable: {reason}; "
                             f"{install_hint('native', reason)} or pass "
                             f"{spell('--engine', 'torch')} (a run keeps the engine it "
                             "started with)")
        if say:
            _note(f"the native engine is unavailable ({reason}); training with the slower "
                  "torch engine")
        return "torch"
    if requested == "cuda":
        reason = unavailable_reason("cuda")
        if reason is not None:
            # the native engine does not train micro-batches
            cpu_engine = "torch" if micro else "native"
            hint = install_hint("cuda", reason, cpu_engine=cpu_engine)
            asked = spell("--engine", "cuda")
            if asked_for_device():  # the caller asked for the GPU with --device cuda: answered so
                asked = spell("--device", "cuda")
                hint = hint.replace(spell("--engine", cpu_engine), spell("--device", "cpu"))
            raise InputError(f"{asked} is unavailable: {reason}; {hint}")
    return requested


def _note(text: str) -> None:
    import sys

    print(f"embedlab: note: {text}", file=sys.stderr)


def engine_module(name: str) -> ModuleType:
    """Import engine ``name``'s module.

    For the torch and cuda engines this is the moment torch is imported: through
    :func:`embedlab.errors.import_torch`, so that a missing torch is one line naming the extra.
    """
    _check_name(name)
    if name in ("torch", "cuda"):
        from embedlab.errors import import_torch, spell

        import_torch(spell("--engine", name))
    # the cuda engine's availability (engines/cuda.py) is asked without importing torch; the
    # engine itself, which does, is its own module
    module = "cuda_engine" if name == "cuda" else name
    return importlib.import_module(f"embedlab.engines.{module}")


def build_engine(name: str, step: StepConfig, params: Word2VecParams,
                 log_kq: np.ndarray | None, rows: int, *, threads: int = 1,
                 tree: HuffmanTree | None = None) -> Engine:
    """Engine ``name`` training ``params`` (taken, not copied) with the step ``step``.

    ``log_kq`` (V,): log(K·Q(w)) for NCE, else None. ``rows``: centre slots per batch.
    ``threads``: the native kernel's threads, or torch's intra-op threads (a process-wide
    setting) for the torch engine. ``tree``: the vocabulary's Huffman tree, for hierarchical
    softmax (``step.loss == "hs"``) only.
    """
    if (step.loss == "hs") != (tree is not None):
        raise ValueError("hierarchical softmax, and only it, takes a Huffman tree")
    engine: Engine = getattr(engine_module(name), _CLASSES[name])(step, params, log_kq, rows,
                                                                  threads, tree=tree)
    return engine


def engine_for_config(cfg: TrainConfig, noise: NoiseDistribution, rows: int, *,
                      tensors: Mapping[str, np.ndarray] | None = None,
                      counts: np.ndarray | None = None) -> Engine:
    """The engine of the resolved ``cfg`` for a vocabulary whose noise distribution is
    ``noise``, for batches of ``rows`` centre slots. ``counts``: the vocabulary's word counts,
    which hierarchical softmax (``--loss hs``) builds its Huffman tree from; other losses do
    not read them.

    Its parameters are a fresh start (the ``init`` stream of ``cfg.seed``), or ``tensors``, a
    checkpoint's, which the engine takes over as they are: no second copy of the model, and no
    initialisation drawn only to be overwritten. Other values (a warm start) are loaded with
    :meth:`~embedlab.engines.base.Engine.load_state_dict`.
    """
    from embedlab.engines.params import Word2VecParams, fresh_params
    from embedlab.engines.step import step_config

    m = cfg.model
    nce, hs = m.loss == "nce", m.loss == "hs"
    params = Word2VecParams.of(tensors, nce=nce, hs=hs) if tensors is not None else \
        fresh_params(m, len(noise), cfg.seed)
    log_kq = noise.log_expected_count(m.negative) if nce else None
    tree = None
    if hs:
        from embedlab.engines.huffman import build_tree

        if counts is None:
            raise ValueError("--loss hs needs the vocabulary's counts for its Huffman tree")
        tree = build_tree(counts)
    return build_engine(cfg.engine, step_config(cfg).step, params, log_kq, rows,
                        threads=cfg.threads, tree=tree)
