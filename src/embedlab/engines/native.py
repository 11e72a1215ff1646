"""The native engine: ``_kernel.c`` built on first use with the machine's C compiler.

One skip-gram or CBOW step in torch is ~60 small tensor operations; their dispatch, temporaries
and memory round trips cost more than the arithmetic. ``_kernel.c`` fuses the step (same
mathematics as :meth:`Word2VecStep._skipgram` and :meth:`Word2VecStep._cbow`; agreement is
tested to float32 rounding) and computes every output element in a fixed order on one thread,
so its results do not depend on the thread count.

Building: ``cc -O3 -march=native -fopenmp -shared`` (``$CC`` overrides ``cc``; it is split
into words like make does, so ``CC="ccache gcc"`` or ``CC="gcc -m64"`` work: the first word is
the program, the rest go before the flags) into ``$EMBEDLAB_CACHE`` (default
``$XDG_CACHE_HOME/embedlab`` or ``~/.cache/embedlab``), under a name hashed from the source, the
compiler's arguments, the flags, the compiler's version and the CPU's feature flags, so a cache
shared between machines never loads code built for another CPU; the file name also carries a
hash of the built file, checked before loading, so a damaged file (truncated by a full disk or
a crash) is built again instead of failing, or crashing, every run. The build is atomic (a
temporary file renamed into place); two processes building at once both succeed. Without a
compiler, ``--engine auto`` falls back to the torch
engine and says so. A cache folder that cannot be written (a file, read-only, full) is not a
missing compiler: the kernel is then built in a temporary folder, removed once loaded, with a
warning naming the folder and the fix (set ``EMBEDLAB_CACHE`` to a writable folder).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from embedlab.engines.base import HostEngine
from embedlab.errors import warn

if TYPE_CHECKING:  # types only: asking whether the kernel builds imports no more than this
    from embedlab.data.pairs import Batch, BatchStream
    from embedlab.engines.huffman import HuffmanTree
    from embedlab.engines.params import Word2VecParams
    from embedlab.engines.step import StepConfig
    from embedlab.engines.stepping import Schedule, StepRunner

SOURCES = ("_kernel.c", "_batches.c", "_tokenise.c", "_stats.c")  # steps; batches, step loop;
# tokeniser; histograms' statistics
STEP_SOURCES = ("_kernel.c", "_batches.c")  # those of a run's arithmetic: initial draw to step
CONTENT_HASH = 16  # hex digits of the built file's sha256 in its name (w2v-KEY-HASH.so)
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")


class NativeUnavailable(RuntimeError):
    """The kernel cannot be built or loaded here; the message says why."""


def cache_dir() -> Path:
    """Where builds are kept: :func:`embedlab.fsutil.cache_folder`."""
    from embedlab.fsutil import cache_folder

    return cache_folder()


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()


def compiler_command() -> list[str]:
    """``$CC`` split into words as make and sh do (``cc`` when unset or blank)."""
    raw = os.environ.get("CC", "")
    try:
        words = shlex.split(raw)
    except ValueError as exc:
        raise NativeUnavailable(f"$CC is not a valid command line ({raw!r}: {exc})") from None
    return words or ["cc"]


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except OSError as exc:
        raise NativeUnavailable(f"cannot run {argv[0]}: {exc}") from exc
    except subprocess.TimeoutExpired:
        raise NativeUnavailable(f"{shlex.join(argv[:2])} ... did not finish within "
                                f"{timeout:.0f} s") from None


def _content_hash(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:CONTENT_HASH]


def _cached(folder: Path, stem: str) -> Path | None:
    """An intact build of ``stem`` in ``folder``: one whose bytes match the hash in its name.

    Checked before loading because dlopen does not survive every damaged file: a truncated
    library (a full disk, a crash) kills the process with SIGBUS. A damaged one is removed, so
    the caller builds it again instead of failing every run until someone deletes it.
    """
    for path in sorted(folder.glob(f"{stem}-*.so")):
        try:
            if _content_hash(path) == path.name[len(stem) + 1 : -len(".so")]:
                return path
            path.unlink()
        except OSError:
            continue  # removed meanwhile by another process, or unreadable: build anew
    return None


def _compile(cc: str, args: list[str], sources: dict[str, bytes], folder: Path,
             stem: str) -> Path:
    """Build into ``folder/stem-HASH.so`` atomically; OSError means ``folder`` is not usable."""
    folder.mkdir(parents=True, exist_ok=True)
    _sweep_dead_builds(folder)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
        files = []
        for name, text in sources.items():
            files.append(str(Path(tmp) / name))
            Path(files[-1]).write_bytes(text)
        out = Path(tmp) / "kernel.so"
        proc = _run([cc, *args, *FLAGS, "-o", str(out), *files, "-lm"], timeout=300)
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["no output"])[0]
            raise NativeUnavailable(f"{cc} failed to build the kernel: {first}")
        target = folder / f"{stem}-{_content_hash(out)}.so"
        os.replace(out, target)
    return target


def _sweep_dead_builds(folder: Path) -> None:
    """Remove the ``.build-*`` folders of builds killed (SIGKILL) an hour or more ago: their
    sources, which nothing else removes. A build takes seconds; a younger one may be running."""
    import time

    for old in folder.glob(".build-*"):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > 3600:
                shutil.rmtree(old, ignore_errors=True)


def kernel_sources() -> dict[str, bytes]:
    """The C sources of the native library, by file name."""
    folder = resources.files("embedlab.engines")
    return {name: folder.joinpath(name).read_bytes() for name in SOURCES}


def _build(sources: dict[str, bytes], command: list[str]) -> tuple[Path, bool, dict[str, str]]:
    """The built kernel, whether it lies in a temporary folder (to remove once loaded), and
    what it was built from (:meth:`_Library.identity`)."""
    program, *args = command
    cc = shutil.which(program)
    if cc is None:
        raise NativeUnavailable(f"no C compiler ({program!r} not found)")
    version = _run([cc, *args, "--version"], timeout=30).stdout
    machine = [shlex.join(args).encode(), " ".join(FLAGS).encode(), version.encode(),
               _cpu_flags().encode(), platform.machine().encode()]
    key = hashlib.sha256(b"\0".join([*sources.values(), *machine]))
    stem = f"w2v-{key.hexdigest()[:20]}"
    # the build's name hashes the sources, the compiler and its flags, and the CPU's features:
    # two runs whose kernels share it compute the same bits. "step" hashes only the sources of
    # training's arithmetic (the tokeniser's and the histograms' sources change no step).
    step = hashlib.sha256(b"\0".join([*(sources[n] for n in STEP_SOURCES if n in sources),
                                      *machine]))
    identity = {"build": stem, "step": step.hexdigest()[:20],
                "compiler": version.splitlines()[0] if version else "",
                "command": shlex.join([program, *args, *FLAGS])}
    folder = cache_dir()
    found = _cached(folder, stem)
    if found is not None:
        return found, False, identity
    try:
        return _compile(cc, args, sources, folder, stem), False, identity
    except OSError as exc:
        # not the compiler's fault: say which folder and how to fix it, and still build
        why = "it is not a folder" if folder.exists() and not folder.is_dir() else \
            exc.strerror or str(exc)
        problem = f"the kernel cache folder {folder} is not usable ({why})"
    try:
        tmp = Path(tempfile.mkdtemp(prefix="embedlab-kernel-"))
    except OSError as exc:
        raise NativeUnavailable(f"{problem}, nor is a temporary folder ({exc.strerror or exc}); "
                                "set EMBEDLAB_CACHE to a writable folder") from exc
    try:
        path = _compile(cc, args, sources, tmp, stem)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise NativeUnavailable(f"{problem}, nor is a temporary folder ({exc.strerror or exc}); "
                                "set EMBEDLAB_CACHE to a writable folder") from exc
    except BaseException:  # a failing compiler, Ctrl-C: the folder is ours alone to remove
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    warn(f"{problem}; built the native kernel in a temporary folder instead (again in each new "
         "process); set EMBEDLAB_CACHE to a writable folder")
    return path, True, identity


class _Library:
    """:func:`library`: the kernel built and loaded once per process, whichever thread asks
    first (the initial vectors' thread may ask while the main thread sets the engine up; two
    threads building at once would each load their own copy)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: ctypes.CDLL | None = None
        self._identity: dict[str, str] | None = None
        self._optional_failed = False  # a build for optional work failed: not tried again

    def __call__(self) -> ctypes.CDLL:
        """The loaded kernel (built if needed); :class:`NativeUnavailable` if impossible."""
        with self._lock:
            if self._lib is None:
                path, temporary, identity = _build(kernel_sources(), compiler_command())
                self._lib = _load(path, temporary)
                self._identity = identity
            return self._lib

    def identity(self) -> dict[str, str] | None:
        """What the loaded kernel was built from — ``build`` (a hash of the sources, the
        compiler's version and flags and the CPU's features), ``compiler`` (its version line),
        ``command`` — for a run's ``env.json``; None before it is loaded."""
        with self._lock:
            return None if self._identity is None else dict(self._identity)

    def optional(self) -> ctypes.CDLL | None:
        """The kernel, built if needed, for work NumPy or Python also does; None where it
        cannot be built. A failed build is not tried again through this call (each try can
        cost the seconds of a compiler's run, at every checkpoint's histograms); the native
        engine, which asks through :meth:`__call__`, still tries."""
        if self._optional_failed:
            return self.loaded()
        try:
            return self()
        except NativeUnavailable:
            with self._lock:
                self._optional_failed = True
            return None

    def loaded(self) -> ctypes.CDLL | None:
        """The kernel if this process has loaded it already, else None (nothing is built)."""
        with self._lock:
            return self._lib

    def cache_clear(self) -> None:
        """Forget the loaded kernel (and a failed build): the next call builds or finds it
        again."""
        with self._lock:
            self._lib = None
            self._identity = None
            self._optional_failed = False


library = _Library()


#: vocabularies from this size use the native library for their one-off work (reading
#: vocab.tsv, the alias table, the Huffman tree) even if it must be compiled first (a few
#: seconds, once per machine: its cache outlives the process); smaller ones use it only when
#: the process has loaded it already (NumPy or Python takes ~0.1 s at 100k words)
NATIVE_VOCAB_WORDS = 500_000


def library_if(build: bool) -> ctypes.CDLL | None:
    """The native library for work that Python or NumPy also does, the same values either way:
    built (compiled first if it must be) when ``build``, else only if this process has loaded it
    already; None where it cannot be built (:meth:`_Library.optional`: a failed build is not
    tried again in this process)."""
    return library.optional() if build else library.loaded()


def _load(path: Path, temporary: bool) -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(str(path))
        for symbol in ("w2v_skipgram_step", "w2v_cbow_step", "w2v_scratch_floats",
                       "w2v_hs_step", "w2v_hs_scratch_floats", "w2v_chunk_build",
                       "w2v_train_batches"):
            getattr(lib, symbol)  # a shared library, but not this kernel: AttributeError
    except (OSError, AttributeError) as exc:
        raise NativeUnavailable(f"cannot load {path}: {exc}") from exc
    finally:
        if temporary:  # a loaded library stays mapped after its file is gone
            shutil.rmtree(path.parent, ignore_errors=True)
    ptr, int_, f32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
    for step in (lib.w2v_skipgram_step, lib.w2v_cbow_step):  # one signature for both
        step.restype = ctypes.c_double
        step.argtypes = [
            int_, ptr, ptr, ptr, ptr,  # dim, w_in, w_out, bias, log_kq
            ptr, int_, ptr, int_,  # centers, rows, span, window
            ptr, ptr,  # mask, contexts
            ptr, int_, int_, f32,  # negatives, groups, shared, noise weight
            f32, f32, f32, ptr,  # lr, rate, bias_sq, scratch
            ptr, ptr, int_,  # h_in, h_out, threads
        ]
    lib.w2v_scratch_floats.restype = ctypes.c_size_t
    lib.w2v_scratch_floats.argtypes = [int_] * 6
    i64 = ctypes.c_int64
    lib.w2v_hs_step.restype = ctypes.c_double
    lib.w2v_hs_step.argtypes = [
        int_, int_, ptr, ptr,  # cbow, dim, w_in, nodes
        ptr, ptr, ptr, int_, i64,  # offsets, points, codes, max_len, terms
        ptr, int_, ptr, int_,  # centers, rows, span, window
        ptr, ptr,  # mask, contexts
        f32, f32, f32, ptr,  # lr, rate, rate_in, scratch
        ptr, ptr, int_,  # h_in, h_node, threads
    ]
    lib.w2v_hs_scratch_floats.restype = ctypes.c_size_t
    lib.w2v_hs_scratch_floats.argtypes = [int_, int_, i64, int_, int_, int_]
    lib.w2v_mt19937_uniform.restype = None
    lib.w2v_mt19937_uniform.argtypes = [ptr, ptr, i64, ptr, int_, f32, f32]
    lib.w2v_huffman_merge.restype = None
    lib.w2v_huffman_merge.argtypes = [i64, ptr, ptr, ptr]
    lib.w2v_huffman_paths.restype = None
    lib.w2v_huffman_paths.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.w2v_alias_walk.restype = i64
    lib.w2v_alias_walk.argtypes = [ptr, i64, ptr, i64, ptr, ptr, ptr]
    lib.tk_vocab_columns.restype = i64
    lib.tk_vocab_columns.argtypes = [ptr, i64, i64, ptr, ptr, i64, ptr, ptr, ptr]
    lib.st_min_max.restype = None
    lib.st_min_max.argtypes = [ptr, i64, int_, ptr, ptr]
    lib.st_counts_moments.restype = int_
    lib.st_counts_moments.argtypes = [ptr, i64, f32, f32, int_, int_, ptr, ptr]
    return lib


def install_hint(reason: str) -> str:
    """What fixes the ``reason`` :func:`unavailable_reason` gave: a usable cache folder, or a
    compiler."""
    if "EMBEDLAB_CACHE" in reason:
        return "set EMBEDLAB_CACHE to a writable folder"
    return "install a C compiler with OpenMP (e.g. apt install gcc)"


def unavailable_reason() -> str | None:
    """None when the native engine works here, else why not (one line)."""
    try:
        library()
    except NativeUnavailable as exc:
        return str(exc)
    return None


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


class NativeStep:
    """Calls the kernel for one skip-gram or CBOW step; owns its scratch memory."""

    def __init__(self, dim: int, rows: int, window: int, threads: int,
                 model: str = "skipgram") -> None:
        self.lib = library()
        self._step = {"skipgram": self.lib.w2v_skipgram_step, "cbow": self.lib.w2v_cbow_step}[model]
        self.dim, self.rows, self.window, self.threads = dim, rows, window, max(1, threads)
        self._scratch = np.empty(0, dtype=np.float32)
        self._shape: tuple[int, int] = (0, 0)

    def _scratch_for(self, groups: int, shared: int) -> np.ndarray:
        if self._shape != (groups, shared):
            n = self.lib.w2v_scratch_floats(self.rows, self.window, groups, shared, self.dim,
                                            self.threads)
            self._scratch = np.empty(int(n), dtype=np.float32)
            self._shape = (groups, shared)
        return self._scratch

    def release_scratch(self) -> None:
        """Hand the scratch back; the next call allocates it again."""
        self._scratch, self._shape = np.empty(0, dtype=np.float32), (0, 0)

    def __call__(self, w_in: np.ndarray, w_out: np.ndarray, bias: np.ndarray | None,
                 log_kq: np.ndarray | None, centers: np.ndarray, span: np.ndarray,
                 mask: np.ndarray, contexts: np.ndarray, negatives: np.ndarray,
                 noise_weight: float, lr: float, rate: float, bias_sq: float,
                 h_in: np.ndarray, h_out: np.ndarray) -> float:
        # the kernel writes through these pointers: they must be the arrays themselves
        for a in (w_in, w_out, h_in, h_out, *(() if bias is None else (bias,))):
            if not (a.flags.c_contiguous and a.flags.writeable and a.dtype == np.float32):
                raise ValueError("the native engine needs writable, contiguous float32 "
                                 "parameters")
        if (bias is None) != (log_kq is None):
            raise ValueError("NCE needs both the output bias and log(K·Q)")
        if mask.dtype != np.uint8:
            raise ValueError("the native engine takes the context mask as uint8 (0/1)")
        # no copies for a batch's arrays, which already have these layouts
        centers = np.ascontiguousarray(centers, np.int64)
        span = np.ascontiguousarray(span, np.int64)
        mask = np.ascontiguousarray(mask, np.uint8)
        contexts = np.ascontiguousarray(contexts, np.float32)
        negatives = np.ascontiguousarray(negatives, np.int64)
        kq = None if log_kq is None else np.ascontiguousarray(log_kq, np.float32)
        groups, shared = negatives.shape
        scratch = self._scratch_for(groups, shared)
        return float(self._step(
            self.dim, _ptr(w_in), _ptr(w_out), _ptr(bias), _ptr(kq),
            _ptr(centers), self.rows, _ptr(span), self.window, _ptr(mask),
            _ptr(contexts), _ptr(negatives), groups, shared, noise_weight, lr, rate,
            bias_sq, _ptr(scratch), _ptr(h_in), _ptr(h_out), self.threads))


class NativeWord2VecStep:
    """:class:`embedlab.engines.torch.Word2VecStep`'s step fused in C: same terms, same damping
    (see its docstring), on the parameters' own memory."""

    def __init__(self, cfg: StepConfig, params: Word2VecParams, log_kq: np.ndarray | None,
                 rows: int, threads: int) -> None:
        self.cfg = cfg
        self.p = params
        vocab, dim = params.w_in.shape
        self._kernel = NativeStep(dim, rows, cfg.window, threads, cfg.model)
        self._log_kq = None if log_kq is None else np.ascontiguousarray(log_kq, np.float32)
        # per-row damping sums; the kernel zeroes the entries it touched after each use
        self._h_in = np.zeros(vocab, dtype=np.float32)
        self._h_out = np.zeros(vocab, dtype=np.float32)

    def scratch_for_batches(self, groups: int, shared: int) -> np.ndarray:
        """The kernel's scratch for batches of ``groups`` × ``shared`` noise words."""
        return self._kernel._scratch_for(groups, shared)

    def release_scratch(self) -> None:
        self._kernel.release_scratch()

    def __call__(self, batch: Batch, lr: float) -> float:
        lr = self.cfg.batch_lr(lr, batch)
        p = self.p
        rate = lr / self.cfg.damping if self.cfg.damping > 0 else 0.0
        return self._kernel(p.w_in, p.w_out, p.b_out, self._log_kq, batch.centers, batch.span,
                            batch.mask, batch.contexts, batch.negatives,
                            self.cfg.negative / batch.negatives.shape[1], lr, rate,
                            p.bias_sq, self._h_in, self._h_out)


class NativeHierarchicalSoftmaxStep:
    """:class:`embedlab.engines.torch_hs.HierarchicalSoftmaxStep` fused in C
    (``w2v_hs_step``): same terms, same damping, on the parameters' own memory."""

    def __init__(self, cfg: StepConfig, params: Word2VecParams, tree: HuffmanTree, rows: int,
                 threads: int) -> None:
        if tree.vocab_size != params.w_in.shape[0] or tree.n_nodes != params.w_out.shape[0]:
            raise ValueError(f"a Huffman tree of {tree.vocab_size} words and {tree.n_nodes} "
                             f"inner nodes does not fit parameters of shapes "
                             f"{params.w_in.shape} and {params.w_out.shape}")
        self.lib = library()
        self.cfg, self.p, self.rows, self.threads = cfg, params, rows, max(1, threads)
        self._offsets = np.ascontiguousarray(tree.offsets, np.int64)
        self._points = np.ascontiguousarray(tree.points, np.int32)
        self._codes = np.ascontiguousarray(tree.codes, np.uint8)
        self._lengths = tree.lengths.astype(np.int64)
        self._max_len = tree.max_length
        self._h_in = np.zeros(params.w_in.shape[0], dtype=np.float32)
        self._h_node = np.zeros(params.w_out.shape[0], dtype=np.float32)
        self._scratch = np.empty(0, dtype=np.float32)
        self._terms = -1  # the scratch fits batches of up to this many (centre, node) terms

    def _scratch_for(self, terms: int) -> np.ndarray:
        if terms > self._terms:  # grows to the largest batch seen, with room to spare
            self._terms = max(terms, self.rows * 16)
            n = self.lib.w2v_hs_scratch_floats(self.rows, self.cfg.window, self._terms,
                                               self._max_len, self.p.w_in.shape[1],
                                               self.threads)
            self._scratch = np.empty(int(n), dtype=np.float32)
        return self._scratch

    def release_scratch(self) -> None:
        """Hand the scratch back; the next call allocates it again."""
        self._scratch, self._terms = np.empty(0, dtype=np.float32), -1

    def terms_capacity(self) -> int:
        """(centre, node) terms a batch can have at most: every centre on the longest path."""
        return self.rows * max(1, self._max_len)

    def scratch_for_batches(self, groups: int, shared: int) -> np.ndarray:
        """The kernel's scratch for any batch (sized by :meth:`terms_capacity`)."""
        return self._scratch_for(self.terms_capacity())

    def __call__(self, batch: Batch, lr: float) -> float:
        lr = self.cfg.batch_lr(lr, batch)
        p = self.p
        for a in (p.w_in, p.w_out):
            if not (a.flags.c_contiguous and a.flags.writeable and a.dtype == np.float32):
                raise ValueError("the native engine needs writable, contiguous float32 "
                                 "parameters")
        if batch.mask.dtype != np.uint8:
            raise ValueError("the native engine takes the context mask as uint8 (0/1)")
        centers = np.ascontiguousarray(batch.centers, np.int64)
        contexts = np.ascontiguousarray(batch.contexts, np.float32)
        terms = int(self._lengths[centers][contexts > 0].sum())
        scratch = self._scratch_for(terms)
        rate, rate_in = (lr / k if k > 0 else 0.0 for k in (self.cfg.damping,
                                                             self.cfg.input_kappa))
        loss = float(self.lib.w2v_hs_step(
            int(self.cfg.model == "cbow"), p.w_in.shape[1], _ptr(p.w_in), _ptr(p.w_out),
            _ptr(self._offsets), _ptr(self._points), _ptr(self._codes), self._max_len,
            self._terms, _ptr(centers), self.rows,
            _ptr(np.ascontiguousarray(batch.span, np.int64)), self.cfg.window,
            _ptr(np.ascontiguousarray(batch.mask, np.uint8)), _ptr(contexts), lr, rate, rate_in,
            _ptr(scratch), _ptr(self._h_in), _ptr(self._h_node), self.threads))
        if loss < 0:  # the kernel counted more terms than the scratch was sized for
            raise RuntimeError("the hierarchical softmax kernel's scratch is too small")
        return loss


#: the process whose native engine was set up to run OpenMP threads (None before): a process
#: forked from it (multiprocessing's default start on Linux) inherits libgomp's state but not
#: its threads, and its first parallel region waits for them forever
_parallel_pid: int | None = None


def threads_here(threads: int) -> int:
    """The threads this process's native engine may run: ``threads``, or 1 in a process forked
    after its parent ran OpenMP threads (1 thread runs no team, and any number of threads gives
    the same bits), with a warning that says how to have them all."""
    allowed = openmp_threads(threads)
    if allowed < max(1, threads):
        from embedlab.errors import warn

        warn(f"this process was forked from one whose native engine ran OpenMP threads "
             f"(multiprocessing's default 'fork' start), whose thread pool a fork does not "
             f"carry over: it trains on 1 thread, not {threads} (the same bits, slower); start "
             f"it with multiprocessing.get_context('spawn') (or 'forkserver') for all of them")
    return allowed


def openmp_threads(threads: int) -> int:
    """The threads a call of the native library may run in this process: ``threads``, or 1 in
    a process forked after its parent ran OpenMP threads (libgomp's pool does not survive a
    fork: a team started there would wait forever)."""
    global _parallel_pid
    threads = max(1, threads)
    if threads > 1 and _parallel_pid is not None and _parallel_pid != os.getpid():
        return 1
    if threads > 1:
        _parallel_pid = os.getpid()
    return threads


class NativeEngine(HostEngine):
    """The native engine: the fused C step on host NumPy parameters (hierarchical softmax on
    the Huffman tree ``tree``)."""

    name = "native"

    def __init__(self, cfg: StepConfig, params: Word2VecParams, log_kq: np.ndarray | None,
                 rows: int, threads: int = 1, *, tree: HuffmanTree | None = None) -> None:
        step: NativeWord2VecStep | NativeHierarchicalSoftmaxStep
        threads = threads_here(threads)
        if tree is not None:
            step = NativeHierarchicalSoftmaxStep(cfg, params, tree, rows, threads)
        else:
            step = NativeWord2VecStep(cfg, params, log_kq, rows, threads)
        super().__init__(params, step)
        self.native_step, self.threads = step, max(1, threads)

    def runner(self, stream: BatchStream, schedule: Schedule, model: str) -> StepRunner:
        """Batches of the batch specification are built in C, many steps per call; others come
        from ``stream`` one by one."""
        from embedlab.data.batchspec import SpecBatchStream

        if isinstance(stream, SpecBatchStream):
            from embedlab.engines.native_batches import NativeBatches

            return NativeBatches(library(), stream, self.native_step, schedule, self.threads)
        return super().runner(stream, schedule, model)
