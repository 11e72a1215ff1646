"""The ``embedlab`` command line: a thin layer over the library.

Commands live in their own modules (``embedlab.cli.<name>``) and are imported lazily, so
``embedlab --help`` is fast and a command's heavy imports (tensorboard, matplotlib; torch for
the torch engine and ``linreg``) are paid only when it runs. Every error the user can fix is
printed as one line and exits with status 2.
"""

from __future__ import annotations

import sys

try:  # a Ctrl-C in the tenth of a second Python takes to import these is a Ctrl-C too
    import contextlib
    import difflib
    import errno
    import importlib
    import itertools
    import os
    import re
    import shlex
    import signal
    from collections.abc import Iterator
    from types import FrameType
    from typing import Any

    import click

    from embedlab.cli.output import echo
    from embedlab.engines import limit_openmp_spinning
    from embedlab.errors import (
        InputError,
        ProcessLost,
        TrainingInterrupted,
        messages_for,
        out_of_memory_loading,
        printable,
        said_by_another_process,
    )
except KeyboardInterrupt:  # the words of embedlab._console, which loads this module
    sys.stderr.write("embedlab: stopped by SIGINT while starting; nothing was done\n")
    raise SystemExit(130) from None

# command name -> "module:attribute" (a click.Command)
COMMANDS: dict[str, str] = {
    "train": "embedlab.cli.train:train",
    "prepare": "embedlab.cli.prepare:prepare",
    "export": "embedlab.cli.query:export",
    "neighbors": "embedlab.cli.query:neighbors",
    "analogy": "embedlab.cli.query:analogy",
    "eval": "embedlab.cli.query:eval_cmd",
    "ckpt": "embedlab.cli.ckpt:ckpt",
    "runs": "embedlab.cli.runs:runs",
    "tensorboard": "embedlab.cli.runs:tensorboard",
    "visualize": "embedlab.cli.runs:visualize",
    "linreg": "embedlab.cli.linreg:linreg",
}
# another spelling -> the command it runs; left out of the command list
ALIASES: dict[str, str] = {"neighbours": "neighbors"}


class LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        """click's, with a closed pipe let through to :func:`main` (click would exit 1 for it
        whatever the pipe: stdout's, stderr's, or a FIFO the user named)."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _PipeClosed from exc
        except KeyboardInterrupt as exc:  # before click's own handling, which adds a blank line
            raise click.Abort from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n in COMMANDS if self._load(n) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(ALIASES.get(cmd_name, cmd_name))

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """click's, with the closest command named when the one typed does not exist."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            if close:
                ctx.fail(f"No such command {name!r}; did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            with loading():
                module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # command not built (yet); hide it
                return None
            raise
        cmd = getattr(module, attr, None)
        return cmd if isinstance(cmd, click.Command) else None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="embedlab")
def cli() -> None:
    """embedlab — word2vec you can stop, resume exactly, reproduce and watch learn."""


class StoppedWhileLoading(Exception):
    """A Ctrl-C while a command's code loads, before it has done anything (click would make
    it an Abort, said as "interrupted")."""


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Imports of a command before it acts: a KeyboardInterrupt there is
    :class:`StoppedWhileLoading`."""
    try:
        yield
    except KeyboardInterrupt:
        raise StoppedWhileLoading from None


def _frames(exc: BaseException) -> Iterator[FrameType]:
    """The frames ``exc`` passed through, outermost first."""
    tb = exc.__traceback__
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def _raised_in_json(exc: BaseException) -> bool:
    """Whether ``exc`` came out of the standard library's JSON decoder."""
    return any(frame.f_code.co_filename.replace("\\", "/").endswith("json/decoder.py")
               for frame in _frames(exc))


def _on_stdout(exc: BaseException) -> bool:
    """Whether ``exc`` came from a write to standard output (``embedlab export ... >
    /dev/full``, a redirect onto a full disk), not to a file of the command's own: the write
    that raised it was made by a frame holding a stream on file descriptor 1 (click's ``echo``
    its ``file``, rich's console its ``file``)."""
    for frame in _frames(exc):
        frame_locals = frame.f_locals
        for name in ("file", "stream", "self"):
            value = frame_locals.get(name)
            for stream in (value, getattr(value, "file", None)):
                with contextlib.suppress(Exception):
                    if stream is not None and callable(getattr(stream, "fileno", None)) and \
                            stream.fileno() == 1:
                        return True
    return False


def _fail(message: str, code: int = 2) -> None:
    # One line, no traceback: the message itself says what to do. A stderr whose reader is
    # gone (2>&1 | true) cannot take it; the status still says what happened.
    with contextlib.suppress(OSError):
        echo(f"embedlab: error: {printable(message)}", err=True)
    sys.exit(code)


_invoked: list[str] = []


def invoked_args() -> list[str]:
    """The arguments of the command being run (``embedlab ARGS``), for a command that starts
    itself again (``train --nproc``)."""
    return list(_invoked)


def _command_named() -> str | None:
    """The command the invoked arguments name (its first argument that is one), if any."""
    for arg in _invoked[:1]:  # embedlab's own options (--version) name no command
        return arg if arg in COMMANDS or arg in ALIASES else None
    return None


def _usage_message(exc: click.UsageError) -> str:
    """click's message, on one line; an unknown option that is gensim's or word2vec.c's name
    for one of ours is told which (click would suggest names spelled alike)."""
    if isinstance(exc, click.NoSuchOption) and exc.ctx is not None and \
            exc.ctx.info_name is not None:
        known = _foreign(exc.ctx.info_name, exc.option_name)
        if known is not None and known.startswith("no option: "):
            return f"No such option '{exc.option_name}': {known.removeprefix('no option: ')}"
        if known is not None:
            return f"No such option '{exc.option_name}'; did you mean {known}?"
    if isinstance(exc, click.NoSuchOption) and exc.ctx is not None and \
            "_" in exc.option_name:  # --out_dir: a flag of the command with underscores
        dashed = exc.option_name.replace("_", "-")
        options = {name for p in exc.ctx.command.params for name in getattr(p, "opts", ())}
        if dashed in options:
            return f"No such option '{exc.option_name}'; did you mean {dashed}?"
    if isinstance(exc, click.NoSuchOption) and exc.ctx is not None and \
            exc.ctx.info_name == "prepare" and exc.option_name in ("--workers", "--threads"):
        return (f"No such option '{exc.option_name}': prepare tokenises with a thread per "
                "core this process may use; set EMBEDLAB_PREPARE_WORKERS=N in the environment "
                "for another number")
    message = exc.format_message().replace("\n", " ")
    extra = re.fullmatch(r"Got unexpected extra arguments? \((\d+)\)", message)
    if extra and exc.ctx is not None and exc.ctx.info_name == "eval":
        # word2vec.c's compute-accuracy VECTORS 30000 < questions-words.txt
        fixes = [f"compute-accuracy's threshold is --restrict-vocab {extra.group(1)}"]
        if "--analogies" not in _invoked:
            fixes.append("the questions come with --analogies FILE (- reads standard input)")
        return f"{message}: {', and '.join(fixes)}"
    extra = re.fullmatch(r"Got unexpected extra argument \((.+)\)", message)
    if extra and exc.ctx is not None and exc.ctx.info_name == "train" and \
            not any(a == "--corpus" or a.startswith("--corpus=") for a in _invoked) and \
            os.path.exists(extra.group(1)):
        # prepare takes its corpus as an argument, train by --corpus (a second --probe word
        # or a number is another slip: no corpus is named there)
        return (f"{message}: the corpus comes with --corpus, e.g. --corpus "
                f"{shlex.quote(extra.group(1))}")
    return message


#: word2vec.c's flags (and compute-accuracy's threshold) typed to a command other than
#: train, and what does their work there; train's are embedlab.training.spellings.FOREIGN
_FOREIGN_FLAGS = {
    "export": {"-binary": "no option: the --out name picks it (vectors.bin: binary, "
                          "vectors.txt: text), or --format word2vec-binary",
               "-output": "--out"},
    "eval": {"-threshold": "--restrict-vocab (compute-accuracy's threshold)"},
    "prepare": {"-train": "no option: the corpus is prepare's argument (embedlab prepare "
                          "CORPUS --out DIR)",
                "-output": "--out",
                "-save-vocab": "no option: prepare writes the vocabulary, with its counts, to "
                               "DIR/vocab.tsv",
                "-read-vocab": "no option: train reads a prepared folder's vocabulary with "
                               "--corpus DIR",
                "-size": "no option: the vectors' size is train's --dim"},
    # TensorBoard's own flag, as its users type it
    "tensorboard": {"-logdir": "no option: the folder of runs is the argument (embedlab "
                               "tensorboard DIR)"},
}
#: prepare's options that train's gensim and word2vec.c names (FOREIGN) may mean
_PREPARE_OPTIONS = ("min_count", "max_vocab", "max_distinct")
#: whose flags those are, where not word2vec.c's
_FOREIGN_OWNER = {"tensorboard": "TensorBoard's"}


def _foreign(command: str, flag: str) -> str | None:
    """What word2vec.c's ``flag`` (one dash or two) means for ``command``, if it is one."""
    from embedlab.training.spellings import FOREIGN, hint

    if command == "train":
        return hint(flag, python=False)
    own = _FOREIGN_FLAGS.get(command, {}).get("-" + flag.lstrip("-"))
    name = flag.lstrip("-").replace("-", "_")
    found = FOREIGN.get(name)
    # gensim's max_vocab_size is --max-distinct here too (-min-count is prepare's own flag)
    if own is None and command == "prepare" and found is not None and found[0] != name and \
            found[0] in _PREPARE_OPTIONS:
        return hint(flag, python=False)
    return own


def _one_dash_flags(args: list[str]) -> str | None:
    """The refusal of long flags typed with one dash (``-size 100``, ``-min-count 5``), which
    click would read as short options (``-s``); None when there are none. Each is named with
    the flag it means: the command's own flag with two dashes, or for ``train`` the option
    that word2vec.c's flag of that name means (all of them at once: a pasted word2vec.c
    command line is told everything in one go). A value that follows an option (``--probe
    -window``) is not taken for a flag."""

    # torchrun's `-m embedlab -- train ...` leads with --; after the command's own --, every
    # argument is a positional one (a word that starts with -)
    words = args[1:] if args[:1] == ["--"] else list(args)
    words = words[:words.index("--")] if "--" in words else words
    if words and words[0] in ALIASES:  # neighbours: neighbors
        words = [ALIASES[words[0]], *words[1:]]
    command = LazyGroup._load(words[0]) if words and words[0] in COMMANDS else None
    if command is None:
        return None
    options = {name for p in command.params if isinstance(p, click.Option)
               for name in (*p.opts, *p.secondary_opts)}
    flags = {name for p in command.params if isinstance(p, click.Option) and p.is_flag
             for name in (*p.opts, *p.secondary_opts)}
    told: list[tuple[str, str]] = []  # (the flag typed, what it means)
    unknown: list[str] = []  # one-dash names that are no flag of any program
    # gensim's names typed with two dashes (--vector-size 50 --workers 4): told with the rest
    # when there are several, as click would name only the first
    double: list[tuple[str, str]] = []
    for before, arg in itertools.pairwise(words):
        if before.startswith("-") and "=" not in before and before not in flags:
            continue  # the option's value
        name = arg.split("=", 1)[0]
        if re.fullmatch(r"--[a-z][a-z_-]+", name) and name not in options:
            known = _foreign(words[0], name)
            if known is not None and name not in (a for a, _ in double):
                double.append((name, known))
            continue
        if not re.fullmatch(r"-[a-z][a-z-]{1,}", arg) or arg in options:
            continue
        if all(f"-{c}" in flags | {"-h"} for c in arg[1:-1]) and f"-{arg[-1]}" in options | {"-h"}:
            continue  # short options run together, as click reads them: -hk is -h -k
        known = _foreign(words[0], arg)
        if known is None and "-" + arg in options:
            known = "-" + arg
        if known is None:  # no flag by any name: click would name a short option (-t)
            unknown.append(arg)
        elif arg not in (a for a, _ in told):
            told.append((arg, known))
    see = f"see 'embedlab {words[0]} --help'"
    if unknown and not told and len(double) < 2:
        close = difflib.get_close_matches("-" + unknown[0], sorted(options), n=1)
        guess = f"; did you mean {close[0]}?" if close else ""
        takes_words = words[0] in ("neighbors", "analogy")
        word = f"a word that starts with - goes after --, as in '-- {unknown[0]}'; " \
            if takes_words and not close else ""
        dashes = "" if close and not close[0].startswith("--") else \
            "embedlab's flags start with two dashes; "
        return f"No such option '{unknown[0]}'{guess} ({dashes}{word}{see})"
    for arg in unknown:
        close = difflib.get_close_matches("-" + arg, sorted(options), n=1)
        told.append((arg, "no option: no such flag" + (f" (did you mean {close[0]}?)"
                                                       if close else "")))
    if not told and len(double) < 2:
        return None
    told += double
    foreign = any(_foreign(words[0], a) for a, _ in told)
    if len(told) == 1:
        arg, known = told[0]
        owner = _FOREIGN_OWNER.get(words[0], "word2vec.c's")
        whose = f"{owner} flag" if foreign else "a flag with one dash"
        if known.startswith("no option: "):
            return f"{arg} is {whose}: {known.removeprefix('no option: ')} ({see})"
        return (f"{arg} is {whose}; did you mean {known}? (embedlab's flags start with two "
                f"dashes; {see})")
    meanings = "; ".join(f"{arg}: {known.removeprefix('no option: ')}"
                         if known.startswith("no option: ") else f"{arg} is {known}"
                         for arg, known in told)
    owner = _FOREIGN_OWNER.get(words[0], "gensim's or word2vec.c's" if double else
                               "word2vec.c's")
    whose = f"{owner} flags" if foreign else "flags with one dash"
    dashes = "embedlab's flags start with two dashes; " if len(told) > len(double) else ""
    return f"{whose}, with embedlab's meanings: {meanings} ({dashes}{see})"


#: the commands that write files, and the signals that stop them as Ctrl-C does (their own
#: clean-up removes what is half written, and prepare says which signal came once its folder
#: was complete); train takes every signal over itself
_WRITERS = {"export": (signal.SIGTERM, signal.SIGHUP), "visualize": (signal.SIGTERM, signal.SIGHUP),
            "ckpt": (signal.SIGTERM, signal.SIGHUP), "prepare": (signal.SIGTERM, signal.SIGHUP)}


def _writers_stopped_cleanly() -> contextlib.AbstractContextManager[None]:
    """For a command that writes files, SIGTERM and SIGHUP raise as Ctrl-C does while it runs:
    their default action ended the process where it stood, leaving hidden temporary files (an
    export's size) that nothing removes, and no word."""
    signals = _WRITERS.get(_command_named() or "")
    if signals is None:
        return contextlib.nullcontext()
    from embedlab.run.signals import terminate_as_interrupt

    return terminate_as_interrupt(signals)


def _reader_gone() -> bool:
    """Whether stdout's or stderr's reader has closed its end (``| head -1``): a pipe whose
    reader is gone polls as an error."""
    import os
    import select
    import stat

    for fd in (1, 2):
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            if any(events & select.POLLERR for _, events in poller.poll(0)):
                return True
        except (OSError, ValueError):
            continue
    return False


class _PipeClosed(Exception):
    """A write hit a closed pipe inside a command; not an OSError, which click would turn into
    exit status 1 itself."""


def _said_by_another() -> bool:
    """Whether this ``train`` is a process of a torchrun run whose line another process of
    this machine prints (:func:`embedlab.errors.said_by_another_process`); other commands
    run in such an environment (an ``eval`` inside someone's job) speak for themselves."""
    return [a for a in _invoked if a != "--"][:1] == ["train"] and said_by_another_process()


def main(argv: list[str] | None = None) -> Any:
    from embedlab.training.launch import end_with_launcher

    end_with_launcher()  # a process of 'train --nproc': it ends with its launcher
    _invoked[:] = sys.argv[1:] if argv is None else [str(a) for a in argv]
    limit_openmp_spinning()
    try:
        foreign = _one_dash_flags(_invoked)  # loads the command (its options)
        if foreign is not None:
            _fail(foreign)
        with messages_for("cli"), _writers_stopped_cleanly():  # errors name flags (--dim)
            return cli.main(args=argv, prog_name="embedlab", standalone_mode=False)
    except InputError as exc:
        # a process of the same torchrun run says it (the first of this machine's processes)
        if exc.printed_by_another or _said_by_another():
            sys.exit(exc.exit_code)
        _fail(str(exc))
    except SystemExit as exc:
        # click ends a write to a closed pipe outside a command (--help, --version) with 1
        if exc.code == 1 and _reader_gone():
            sys.exit(128 + signal.SIGPIPE)
        raise
    except click.exceptions.NoArgsIsHelpError as exc:
        # a usage error's help: on stderr, as every refusal (stdout holds results only)
        with contextlib.suppress(OSError):
            echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        sys.exit(2)
    except click.UsageError as exc:
        sub = exc.ctx.info_name if exc.ctx and exc.ctx.info_name != "embedlab" else \
            _command_named()  # click's parser gives no context for "--sort" missing its value
        hint = f" (see 'embedlab {sub} --help')" if sub else " (see 'embedlab --help')"
        _fail(_usage_message(exc) + hint)
    except click.ClickException as exc:
        _fail(exc.format_message().replace("\n", " "), exc.exit_code if exc.exit_code else 2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except StoppedWhileLoading:
        if not _said_by_another():
            echo("embedlab: stopped by SIGINT while starting; nothing was done", err=True)
        sys.exit(130)
    except click.Abort as exc:
        from embedlab.run.signals import Terminated

        if isinstance(exc.__cause__, Terminated):  # see _writers_stopped_cleanly
            name = signal.Signals(exc.__cause__.signum).name
            echo(f"embedlab: terminated ({name}); the partial output is removed",
                       err=True)
            sys.exit(128 + exc.__cause__.signum)
        if not _said_by_another():  # every process of a run gets the Ctrl-C
            # every command writes its files whole, then renames them into place
            echo("embedlab: interrupted (SIGINT); nothing half-written is left", err=True)
        sys.exit(130)
    except TrainingInterrupted as exc:
        if exc.printed_by_another:
            sys.exit(exc.exit_code)
        prefix = "embedlab: error: " if isinstance(exc, ProcessLost) else ""
        echo(f"{prefix}{exc}", err=True)
        sys.exit(exc.exit_code)
    except (BrokenPipeError, _PipeClosed):
        if _reader_gone():  # embedlab ... | head -1: ends as a program killed by SIGPIPE would
            sys.exit(128 + signal.SIGPIPE)  # run() flushes what is left without failing
        _fail("a write to a pipe failed: its reader is gone (Broken pipe); what was written "
              "there is incomplete — keep the reader open until the command ends, and re-run")
    except OSError as exc:
        # The net under the specific messages: a path the user chose that cannot be used
        # (permissions, a file where a folder is needed, a full disk) is theirs to fix, so it
        # gets one line too. A full or read-only disk is the user's to fix even when the write
        # that hit it names no file (os.write, fsync, a library's writer). Other errors without
        # a path, or of other kinds, remain bugs: traceback.
        from embedlab.fsutil import DISK_ERRORS, disk_fix  # not loaded for --help

        if exc.filename is None and exc.errno in DISK_ERRORS and _on_stdout(exc):
            where = "to a terminal or a disk that works" if exc.errno == errno.EIO else \
                "where there is room"  # a terminal gone (its window closed) gives EIO
            _fail(f"cannot write to standard output ({exc.strerror}): what the command printed "
                  f"there is incomplete, the files it wrote are complete; send the output "
                  f"{where}")
        if exc.errno in DISK_ERRORS:
            # the file named where the error names it (atomic_open adds it to its writes); an
            # input/output error may be a read's
            what = "a read or write" if exc.errno == errno.EIO else "a write"
            where = "" if exc.filename is None else \
                f" {'of' if exc.errno == errno.EIO else 'to'} {exc.filename}"
            _fail(f"{what}{where} failed ({exc.strerror}); {disk_fix(exc)} and re-run the same "
                  "command: what was saved before is intact, and a training run resumes from "
                  "its last checkpoint")
        if exc.filename is None or exc.errno not in _USER_FIXABLE:
            raise
        if exc.errno in (errno.EMFILE, errno.ENFILE):  # the process's limit, not the path
            _fail(f"cannot use {exc.filename} ({exc.strerror}); raise the open-file limit "
                  "(ulimit -n 1024 or more) and re-run the command")
        if exc.errno in (errno.EACCES, errno.EPERM):  # read or write: the permissions, alone
            _fail(f"cannot use {exc.filename} ({exc.strerror}); give your user permission to "
                  "read it, or, for a file being made, to write in its folder")
        _fail(f"cannot use {exc.filename} ({exc.strerror}); check that the path exists, that "
              "its parents are folders, that you may write there, and that the disk has room")
    except MemoryError:
        _fail(_OUT_OF_MEMORY)
    except RecursionError as exc:
        # json's parser on arrays nested thousands deep: a record of a run damaged, or made so
        # by someone; which one, the parser does not say. Any other recursion is a bug.
        if not _raised_in_json(exc):
            raise
        _fail("a JSON file the command read nests too deeply to be read (damaged, or made so "
              "on purpose): restore the run's files (config.json, env.json, status.json, "
              "metrics.jsonl, its checkpoints' MANIFEST.json and state.json) from a backup")
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
        # a number of thousands of digits in a JSON record: Python refuses to convert it
        _fail("a file the command read holds a number of thousands of digits, which no record "
              "of embedlab's has (damaged, or made so on purpose): restore the run's files "
              "from a backup")
    except RuntimeError as exc:
        # torch reports a failed CPU allocation as a RuntimeError, not MemoryError
        if "can't allocate memory" in str(exc):
            _fail(_OUT_OF_MEMORY)
        if "can't start new thread" in str(exc):  # threading's words for EAGAIN
            _fail(_NO_THREAD)
        raise
    except ImportError as exc:
        # a module whose shared library cannot be mapped: the memory limit (ulimit -v), not a
        # missing package
        if not out_of_memory_loading(exc):
            raise
        _fail(_OUT_OF_MEMORY)
    return None


_OUT_OF_MEMORY = ("out of memory; free memory or, for train, lower --dim, --batch-size, --window "
                  "or --max-vocab, and re-run: what was saved before is intact")
_NO_THREAD = ("cannot start a thread: the limit on the user's processes (ulimit -u) or on "
              "memory (ulimit -v) is reached; raise it or, for train, lower --threads, and "
              "re-run: what was saved before is intact")


_USER_FIXABLE = {errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR, errno.EISDIR,
                 errno.EEXIST, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG,
                 errno.ENAMETOOLONG, errno.ELOOP, errno.EMFILE, errno.ENFILE}


def run() -> None:
    """The console script and ``python -m embedlab``: :func:`main`, then a quick exit.

    With TensorBoard and matplotlib (and, on the torch engine, torch) loaded, the interpreter's
    own shutdown (a garbage collection over every object, then tearing down ~1,000-2,000
    modules) takes up to ~0.5 s, a tenth of a one-epoch gcide8 run. Everything embedlab writes
    is closed and fsynced before ``main`` returns, so after what a normal exit would still do
    that matters — waiting for non-daemon threads, atexit handlers, flushing stdout/stderr —
    the process ends with ``os._exit``.
    Exceptions other than ``SystemExit`` (bugs, Ctrl-C outside training) exit the normal way,
    with their traceback. In-process callers (tests, notebooks) use :func:`main`, which returns.
    """
    import atexit
    import contextlib
    import os
    import threading

    try:
        main()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe (embedlab ... | head) has nothing left to save
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if code == 130:  # a Ctrl-C, saved and said: end as SIGINT's, so that a calling shell stops
        from embedlab.run.signals import end_as_interrupted

        end_as_interrupted()
    os._exit(code or 0)
