"""User-facing errors.

Anything the user can fix (bad path, bad flag value, empty corpus...) is raised as
:class:`InputError` (a ``ValueError``). The CLI prints it as one line
``embedlab: error: <message>`` and exits 2, never with a traceback. The message names the
problem *and* the fix.

A message names what the user passed as the user passed it: ``--dim`` to the command,
``dim=`` to ``embedlab.train``. The two callers reach the same functions (the command calls
``embedlab.train``), so a message asks :func:`spell` for the spelling (:func:`spell_name` for
the bare name, :func:`spell_metavar` with a placeholder), and the spelling is chosen once,
where a call comes in: the command line enters :func:`messages_for` ``("cli")`` around every
command; each Python entry point (``embedlab.train``, ``embedlab.load``,
``Vectors.to_word2vec``...) is decorated with :func:`python_entry`, which enters ``"python"``
unless the command line already chose. A context variable, not a parameter, because the
messages are built many calls deep (in config validation, in the export writers) by functions
that have no other reason to know who called them. Outside both (the library's modules called
directly, as their tests do) messages spell flags.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import shlex
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import FrameType
from typing import Any, Literal, ParamSpec, TypeVar


class InputError(ValueError):
    """A problem with the user's input; the message says what is wrong and what to do.

    A ``ValueError``, as Python's and gensim's refusals of a bad argument are: ``except
    ValueError`` around a call catches it (an unknown word is also a ``KeyError``:
    :class:`embedlab.vectors.UnknownWordError`)."""

    exit_code = 2
    #: another process of the same torchrun run prints the same line on this machine
    printed_by_another = False


def said_by_another_process() -> bool:
    """Whether another process of this machine says what this one would (the first of the
    processes torchrun or ``--nproc`` started here, ``LOCAL_RANK`` 0): a refusal or a notice
    that every process meets alike is then printed once per machine, not once per process."""
    import os

    return os.environ.get("LOCAL_RANK", "0") not in ("", "0") and \
        os.environ.get("WORLD_SIZE", "1") not in ("", "1")


def diverged(step: int, loss: float, saved_step: int, fix: str) -> InputError:
    """A training loop's loss became non-finite at ``step``; raised before anything of that step
    is saved, so the checkpoints on disk (up to ``saved_step``) stay finite."""
    kept = f"checkpoints up to step {saved_step} are intact" if saved_step > 0 else \
        "no checkpoint was written"
    return InputError(f"training diverged at step {step}: the loss became {loss}; {kept}. {fix}")


class MissingFileError(InputError, FileNotFoundError):
    """A file named by the caller that does not exist: an :class:`InputError` (one line naming
    the fix) that is also the ``FileNotFoundError`` gensim raises, so that ``except OSError``
    or ``except FileNotFoundError`` written for gensim catches it. ``filename`` is the path."""

    __str__ = Exception.__str__  # the message alone, not OSError's "[Errno 2] ..."

    def __init__(self, message: str, path: str | os.PathLike[str]) -> None:
        super().__init__(message)
        self.errno, self.strerror = errno.ENOENT, os.strerror(errno.ENOENT)
        self.filename = os.fspath(path)

    def __reduce__(self) -> tuple[Any, ...]:
        # __init__'s two arguments: pickle (a multiprocessing worker's error reaching its
        # parent) and copy rebuild it with them
        return type(self), (self.args[0] if self.args else "", self.filename), self.__dict__


def restated(exc: InputError, message: str) -> InputError:
    """``exc`` in other words (a prefix naming the option, a way out added), of its kind: a
    :class:`MissingFileError` stays one, with its ``filename``."""
    if isinstance(exc, MissingFileError):
        return MissingFileError(message, exc.filename)
    return InputError(message)


class TrainingInterrupted(BaseException):
    """A training call stopped after saving its step (or before it saved anything); carries
    the exit code. Calling again resumes.

    A stop by a signal (SIGINT, SIGTERM, SIGHUP) or by a ``SystemExit`` is, as Python's own
    ``KeyboardInterrupt`` and ``SystemExit`` are, no ``Exception``: ``except Exception`` around
    a call (a sweep that goes on past a configuration that fails) does not swallow the user's
    Ctrl-C or the machine's SIGTERM. A stop caused by an error — an ``on_progress`` that raised
    an ``Exception``, a lost process — is an :class:`TrainingStoppedByError`, which is one."""

    printed_by_another = False  # as InputError's

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple[Any, ...]:
        # the two arguments __init__ takes (pickle, copy and multiprocessing rebuild with them)
        return type(self), (self.args[0] if self.args else "", self.exit_code), self.__dict__


class TrainingStoppedByError(TrainingInterrupted, Exception):
    """:class:`TrainingInterrupted` because of an error, not a signal: an ``on_progress``
    callback raised an ``Exception`` (the ``__cause__``), or another process of the run stopped
    for one. An ``Exception``, as the error itself would have been."""


class TrainingKeyboardInterrupt(TrainingInterrupted, KeyboardInterrupt):
    """:class:`TrainingInterrupted` of a Ctrl-C (SIGINT, or ``KeyboardInterrupt`` raised by an
    ``on_progress`` callback) in a Python call: ``except KeyboardInterrupt`` catches it too, as
    it catches gensim's. Not raised to the command, whose framework would read a
    ``KeyboardInterrupt`` as its own abort and lose the saved step's message."""


def rerun() -> str:
    """How the caller runs a command again: ``re-run the same command`` in a shell,
    ``call embedlab.train again with the same arguments`` in Python."""
    return ("call embedlab.train again with the same arguments" if python_caller()
            else "re-run the same command")


#: the flags of the call now training that act once (``--restart``, ``--from``): typed again,
#: they would start over, or go back to that checkpoint, instead of resuming
_ONE_SHOT: ContextVar[tuple[str, ...]] = ContextVar("embedlab_one_shot", default=())


@contextlib.contextmanager
def acting_once(*flags: str) -> Iterator[None]:
    """Within the block, :func:`resume_how` leaves ``flags`` (``"--restart"``, ``"--from"``)
    out of the command that resumes."""
    token = _ONE_SHOT.set(tuple(flags))
    try:
        yield
    finally:
        _ONE_SHOT.reset(token)


def resume_how() -> str:
    """How to resume a run this call trained and saved: :func:`rerun`, less the flags that act
    once (see :func:`acting_once`)."""
    left_out = acting_once_left_out()
    if not left_out:
        return rerun()
    if python_caller():
        return f"call embedlab.train again with the same arguments but{left_out}"
    return f"re-run the same command{left_out}"


def acting_once_left_out() -> str:
    """`` without --restart`` (``restart=True`` in Python) for the flags that act once in the
    call now training; empty when it has none."""
    flags = _ONE_SHOT.get()
    if not flags:
        return ""
    names = [spell(f, True) if f == "--restart" else spell_name(f, python="from_checkpoint")
             for f in flags]
    return f" without {' and '.join(names)}"


class ProcessLost(TrainingStoppedByError):
    """A run trained by several processes stopped because one of them did (it died, its link
    broke) or disagrees; the checkpoints saved before are intact."""


class EmbedlabWarning(UserWarning):
    """What :func:`warn` says to a Python caller (``embedlab.train``, ``embedlab.load``...), as
    Python's ``warnings`` says it: shown on stderr by default, at the line of the caller's code
    that called embedlab, and filtered as any warning is
    (``warnings.simplefilter("ignore", embedlab.EmbedlabWarning)``, or ``"error"`` to stop)."""


#: where :func:`warn` puts its messages instead of saying them: set in a helper process whose
#: parent says them, to its own caller (see :mod:`embedlab.data.tokenise_child`), and around a
#: save's retention. A context variable: each thread (two runs trained at once) has its own.
_COLLECTED: ContextVar[list[str] | None] = ContextVar("embedlab_collected", default=None)


@contextlib.contextmanager
def collecting_warnings() -> Iterator[list[str]]:
    """Within the block, :func:`warn` collects its messages into the list it yields."""
    said: list[str] = []
    token = _COLLECTED.set(said)
    try:
        yield said
    finally:
        _COLLECTED.reset(token)


#: what a terminal acts on instead of showing: C0 and C1 control codes (ESC starts its escape
#: sequences), DEL, and Unicode's bidirectional embeddings, overrides and isolates (which
#: reorder the text after them); lone surrogates (a file name's undecodable bytes), which a
#: stream writes escaped or as bytes, not as the one character a table measured; and, in a
#: one-line message, the line breaks as well. Also the format characters that show nothing
#: (a soft hyphen, a zero-width space, a word joiner, U+FEFF, the direction marks): words that
#: differ only by one would print alike ('word' and 'wo\xadrd'); not the zero-width joiner and
#: non-joiner and the Mongolian vowel separator, which shape the letters of their scripts and
#: the emoji sequences.
_ACTED_ON = ("\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069"
             "\ud800-\udfff\u00ad\u061c\u200b\u200e\u200f\u2060-\u2064\ufeff")
_UNSHOWN = re.compile(f"[{_ACTED_ON}]")
_UNSHOWN_OR_BREAK = re.compile(f"[{_ACTED_ON}\n\r\x0b\x0c\x1c-\x1f\x85\u2028\u2029]")


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` for a message: ``1 word``, ``2,000 words``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def printable(text: str, *, one_line: bool = True) -> str:
    r"""``text`` to show on a terminal: what the terminal would act on instead of showing
    written as Python's escapes (``\x1b``, ``\u202e``, ``\udcff``), so that a word or a path
    holding them cannot clear the screen, reorder a line or shift a table's columns; with
    ``one_line`` (messages, table cells), line breaks as well (``\n``), so that a message or a
    row naming such a path stays the one line it is."""
    pattern = _UNSHOWN_OR_BREAK if one_line else _UNSHOWN
    return pattern.sub(lambda m: ascii(m.group())[1:-1], text)


def warn(message: str) -> None:
    """Something the user should know and may act on, that does not stop the work.

    On the command line, one line on stderr, ``embedlab: warning: ...``. In a Python call (see
    :func:`messages_for`), an :class:`EmbedlabWarning` through ``warnings.warn``, so that a
    notebook or a program can filter it, record it, or make it an error, as it does the warnings
    of NumPy or gensim."""
    collected = _COLLECTED.get()
    if collected is not None:
        collected.append(message)
        return
    if python_caller():
        import warnings

        warnings.warn(message, EmbedlabWarning, stacklevel=_callers_level())
        return
    import sys

    print(f"embedlab: warning: {printable(message)}", file=sys.stderr, flush=True)


def _callers_level() -> int:
    """``warnings.warn``'s stacklevel, counted from :func:`warn`, of the first frame outside the
    embedlab package: the warning names the line of the caller's code (Python 3.12's
    ``skip_file_prefixes`` does this; 3.11 has no such argument)."""
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame: FrameType | None = sys._getframe(2)  # warn()'s caller: level 2
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def note(message: str) -> None:
    """One line on stderr that informs (the choice made for the user), once per machine under
    torchrun."""
    import sys

    if not said_by_another_process():
        print(f"embedlab: note: {printable(message)}", file=sys.stderr, flush=True)


def import_torch(purpose: str) -> Any:
    """``import torch`` for ``purpose`` (e.g. "--engine torch"), or one line naming the extra.

    PyTorch is optional: ``pip install embedlab`` trains with the native engine and answers every
    query command without it; ``pip install "embedlab[torch]"`` adds the torch engine and linreg.
    """
    try:
        import torch
    except ImportError as exc:
        if out_of_memory_loading(exc):  # installed, but its libraries do not fit (ulimit -v)
            raise MemoryError(f"out of memory loading PyTorch for {purpose}") from None
        raise InputError(f"{purpose} needs PyTorch, which is not installed; install it with "
                         "pip install 'embedlab[torch]'") from None
    return torch


def out_of_memory_loading(exc: ImportError) -> bool:
    """Whether an ImportError is the loader's failure to map a shared library into memory (a
    memory limit such as ``ulimit -v``), not a missing or broken package."""
    text = str(exc)
    return "failed to map segment" in text or "cannot allocate memory" in text.lower()


Caller = Literal["cli", "python"]
_CALLER: ContextVar[Caller | None] = ContextVar("embedlab_caller", default=None)
_NO_VALUE: Any = object()
_P = ParamSpec("_P")
_R = TypeVar("_R")


@contextlib.contextmanager
def messages_for(caller: Caller) -> Iterator[None]:
    """Messages raised inside the block name the inputs as ``caller`` passes them: flags
    (``--dim``) for ``"cli"``, argument names (``dim=``) for ``"python"``. ``"python"`` leaves an
    enclosing ``"cli"`` in place: the commands call the Python entry points."""
    if caller == "python" and _CALLER.get() == "cli":
        yield
        return
    token = _CALLER.set(caller)
    try:
        yield
    finally:
        _CALLER.reset(token)


def python_entry(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a function Python users call: its messages name arguments, not flags."""

    @functools.wraps(func)
    def entry(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with messages_for("python"):
            return func(*args, **kwargs)

    return entry


def python_caller() -> bool:
    """Whether messages now name Python arguments (``dim=``) rather than flags (see
    :func:`messages_for`): for a message whose words, not only its flags, differ between the two
    (``--no-lowercase`` is ``lowercase=False``)."""
    return _CALLER.get() == "python"


def on_command_line() -> bool:
    """Whether the ``embedlab`` command is running (not a library call from Python code)."""
    return _CALLER.get() == "cli"


def spell(flag: str, value: Any = _NO_VALUE, *, python: str | None = None) -> str:
    """``flag`` (``"--dim"``) as the caller passes it (see :func:`messages_for`).

    ``spell("--dim")``: ``--dim`` or ``dim=``; ``spell("--dim", 100)``: ``--dim 100`` or
    ``dim=100``; ``spell("--force", True)``: ``--force`` or ``force=True``. ``python``: the
    argument's name where it is not the flag's (an export's ``--out`` is ``path=``).
    """
    if not python_caller():
        return flag if value is _NO_VALUE or value is True else f"{flag} {value}"
    name = _argument(flag, python)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)  # path='runs/a', not path=PosixPath('runs/a')
    return f"{name}=" if value is _NO_VALUE else f"{name}={value!r}"


def spell_name(flag: str, *, python: str | None = None) -> str:
    """``flag`` alone, as the subject of words that follow: ``--probe`` or ``probe``, for
    "probe word(s) not in the vocabulary", where ``probe=`` would read as an unfinished
    assignment. ``python`` as for :func:`spell`."""
    return _argument(flag, python) if python_caller() else flag


def spell_metavar(flag: str, metavar: str, *, python: str | None = None) -> str:
    """``flag`` with a placeholder for its value: ``--run DIR`` or ``run=DIR``; unquoted, since
    ``DIR`` stands for a value and is none. ``python`` as for :func:`spell`."""
    return f"{_argument(flag, python)}={metavar}" if python_caller() else f"{flag} {metavar}"


def _argument(flag: str, python: str | None) -> str:
    """The Python argument that flag ``--init-from`` is: ``init_from``, unless named."""
    return python or flag.lstrip("-").replace("-", "_")


def make_folder(folder: os.PathLike[str] | str) -> str:
    """How the caller creates a missing folder: ``mkdir -p DIR`` in a shell,
    ``os.makedirs('DIR')`` in Python."""
    return f"os.makedirs({os.fspath(folder)!r})" if python_caller() else \
        f"mkdir -p {shlex.quote(os.fspath(folder))}"


def numpy_bool(value: Any) -> bool:
    """NumPy's bool scalar (``numpy.bool_``; its type is named ``bool`` from NumPy 2), told
    apart without importing NumPy."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")


def step_number(value: Any) -> int | None:
    """``value`` as a checkpoint's step (an integer >= 0, NumPy's too, not a bool), else None."""
    import numbers

    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:
        return int(value)
    return None


def checked_bool(name: str, value: Any) -> bool:
    """A Python call's bool argument ``name`` (``restart``), refused unless it is one: a str
    such as ``"no"`` is truthy and would do the opposite of what it says."""
    if numpy_bool(value):
        return bool(value)
    if not isinstance(value, bool):
        got = f"the {type(value).__name__} {value!r}" if isinstance(value, str) else repr(value)
        raise InputError(f"{name}= must be True or False, got {got}; pass e.g. {name}=True")
    return value


def checked_step(name: str, value: Any, run: Any = None) -> int | None:
    """A Python call's step argument ``name`` (a checkpoint's step): an integer >= 0 or None.
    ``run``, the folder the step is looked up in, names it in the hint that lists the steps."""
    if value is None:
        return None
    step = step_number(value)
    if step is not None:
        return step
    got = f"the {type(value).__name__} {value!r}" if isinstance(value, str) else repr(value)
    if not python_caller():  # the command's --step (neighbors RUN --step -1)
        raise InputError(f"--{name} must be a checkpoint's step, an integer >= 0, got {got}; "
                         f"pass e.g. --{name} 1000 (list them: embedlab ckpt "
                         f"{shlex.quote(str(run)) if run is not None else 'RUN'})")
    raise InputError(f"{name}= must be a checkpoint's step, an integer >= 0, got {got}; pass "
                     f"e.g. {name}=1000 (list them: embedlab.checkpoints("
                     f"{repr(str(run)) if run is not None else 'run'}))")
