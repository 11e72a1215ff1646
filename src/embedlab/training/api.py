"""Training from Python, as ``embedlab train`` trains from a shell: ``embedlab.train(...)``.

Both pick the run folder the same way (the same automatic names under ``runs_dir``), resume a
run the same way, print the same lines on stderr and write the same files; the command only
parses its flags and calls :func:`train`. What only Python can pass: sentences in memory as the
corpus, and a progress callback.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import os
import re
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedlab.config import (  # the call's options: the command's flags
    LISTS,
    OPTIONS,
    split_best_metric,
)
from embedlab.engines import limit_openmp_spinning, requested_engine
from embedlab.errors import (
    InputError,
    TrainingInterrupted,
    TrainingKeyboardInterrupt,
    acting_once,
    checked_bool,
    note,
    printable,
    python_caller,
    python_entry,
    rerun,
    said_by_another_process,
    spell,
    spell_name,
    step_number,
)
from embedlab.fsutil import clip, missing_folders, remove_empty_folders, write_error
from embedlab.run.folder import (
    CONFIG_FILE,
    check_run_dir,
    check_runs_dir,
    choose_run_dir,
    corpus_not_found,
    is_a_run,
    resolve_config,
    restart_options,
    stored_config,
    stored_config_from_here,
)
from embedlab.run.lock import RunInUse
from embedlab.training import distributed, handshake
from embedlab.training.launched import typed_argv

if TYPE_CHECKING:
    import numpy as np

    from embedlab.config import TrainConfig
    from embedlab.data.tokenise_child import PrepareAhead
    from embedlab.training.reporting import Progress
    from embedlab.training.state import TrainResult

#: a corpus: a path (or "demo", "text8"), or sentences given in memory
Corpus = str | os.PathLike[str] | Iterable[Sequence[str]]


@python_entry
def train(corpus: Corpus | None = None, run: str | os.PathLike[str] | None = None,
          runs_dir: str | os.PathLike[str] = "runs", preset: str | None = None,
          restart: bool = False,
          from_checkpoint: str | os.PathLike[str] | int | np.integer | None = None, *,
          device: str | None = None, on_progress: Callable[[Progress], object] | None = None,
          no_eval: bool = False, no_probe: bool = False, **options: Any) -> TrainResult:
    """Train word2vec into a run folder, or resume the run there; ``embedlab train`` in Python.

    ``corpus``: ``"demo"`` (built in, the default for a new run), ``"text8"`` (downloaded), a
    file or folder of text, a folder made by ``embedlab prepare``, or sentences in memory as
    gensim's ``Word2Vec(sentences=...)`` takes them: an iterable of lists of str tokens, read
    once (a generator will do), prepared as a file with one sentence per line would be
    (:mod:`embedlab.data.sentences`). The run's config.json records such a corpus as
    ``<iterable sha256:...>``, a hash of the sentences: the same sentences resume the run, other
    ones are refused, and a run that saved a checkpoint resumes without them (``corpus=None``),
    from its copy in ``RUN/prepared``. ``run``: the run folder,
    created, or resumed from its latest verified checkpoint; None names one under ``runs_dir``
    from the options that differ from the defaults (``runs/demo-sg``, ``runs/text8-sg-d200``),
    and a call with the same options resumes it. ``preset``: a named configuration
    (``"cs20"``); options override it. ``restart``: start the run over, moving the old folder
    aside to ``RUN.old-<time>``. ``from_checkpoint``: resume from this checkpoint of the run
    (its step as an int, its folder or name, ``"best"``, or ``"latest"``: where a resume
    without it starts), moving newer ones aside.

    ``options``: the other flags of ``embedlab train``, named with underscores and taking the
    same values — ``dim=100``, ``window=5``, ``epochs=5``, ``model="cbow"``, ``loss="nce"``,
    ``engine="native"``, ``threads=2``, ``seed=1``, ``max_steps=1000``, ``tensorboard=False``,
    ``probe=["king", "queen"]``, ``eval_similarity=["ws353.tsv"]`` and so on (see
    :data:`OPTIONS`). An option left out (or None) is the default for a new run and the stored
    value for a resumed one. An unknown name raises :class:`~embedlab.errors.InputError`.

    ``no_eval``, ``no_probe``: drop a resumed run's evaluation (``eval_every``, its analogy and
    similarity files) or probe words from here on — files since moved or deleted stop the
    run's resume otherwise.

    ``device`` (``"auto"``, ``"cpu"`` or ``"cuda"``): where to train, a second spelling of
    ``engine``: ``"cuda"`` is ``engine="cuda"``, ``"cpu"`` a CPU engine (native where it builds,
    else torch), ``"auto"`` (or None) the GPU where one is found, else the CPU; a resumed run
    keeps its engine unless told otherwise. ``device`` and ``engine`` that contradict each other
    are refused.

    ``on_progress``: called with a :class:`~embedlab.training.reporting.Progress` (``step``,
    ``words_seen``, ``loss``, ``lr``, ``words_per_sec``, ``progress``) at the end of every
    logging window, the values metrics.jsonl gets, and once more with ``final=True`` when the
    call ends. An exception it raises stops training as Ctrl-C does: the step is saved and
    ``TrainingInterrupted`` is raised from it.

    Prints what ``embedlab train`` prints on stderr (a progress bar only on a terminal), but for
    its warnings, issued as :class:`~embedlab.errors.EmbedlabWarning` through Python's
    ``warnings``.
    Returns a :class:`~embedlab.training.state.TrainResult`: ``vectors`` (the trained
    :class:`~embedlab.vectors.Vectors`), ``run_dir``, ``step``, ``loss``, ``words_seen``,
    ``finished`` and the resolved ``config``. Refused input raises ``InputError``, the one-line
    message the command prints, naming arguments (``dim=``) where the command names flags;
    SIGINT/SIGTERM save a checkpoint and raise :class:`~embedlab.errors.TrainingInterrupted`.
    """
    limit_openmp_spinning()  # before the native kernel (or torch) loads libgomp
    restart = checked_bool("restart", restart)
    _check_path("run", run, optional=True)
    _check_path("runs_dir", runs_dir)
    if options.get("init_from") == "":  # "--init-from $RUN" of an unset variable: no warm start
        raise InputError(f"{spell_name('--init-from')} is empty (an unset variable?); pass the "
                         f"run or checkpoint to copy from, or leave {spell_name('--init-from')} "
                         "out for a cold start")
    # "--eval-analogies $FILE" of an unset variable evaluated nothing, silently; "--from $CKPT"
    # resumed from the latest
    for key, flag, what in (("eval_analogies", "--eval-analogies", "a questions-words file"),
                            ("eval_similarity", "--eval-similarity", "a word-pair file")):
        value = options.get(key)
        values = [value] if isinstance(value, str | os.PathLike) else \
            list(value) if isinstance(value, list | tuple) else []
        if any(isinstance(v, str | os.PathLike) and os.fspath(v) == "" for v in values):
            raise InputError(f"{spell_name(flag)} is empty (an unset variable?); pass {what}, "
                             f"or leave {spell_name(flag)} out")
    if isinstance(from_checkpoint, str | os.PathLike) and os.fspath(from_checkpoint) == "":
        raise InputError(f"{spell_name('--from', python='from_checkpoint')} is empty (an unset "
                         "variable?); pass a checkpoint of the run (its step, its folder or "
                         f"best), or leave {spell_name('--from', python='from_checkpoint')} out "
                         "to resume from the latest")
    if preset is not None and not isinstance(preset, str):
        raise InputError(f"preset= must be a preset's name (a str), got {type(preset).__name__} "
                         f"{clip(repr(preset))}; e.g. preset='cs20'")
    from_checkpoint = _checked_from(from_checkpoint)
    sentences = None if corpus is None or isinstance(corpus, (str, os.PathLike)) else corpus
    if isinstance(corpus, os.PathLike):
        from embedlab.data.corpus import corpus_label

        corpus = corpus_label(corpus)
    if sentences is not None:
        _check_iterable(sentences)
    # a cuda engine refused for a call that asked for device='cuda' says device=, as asked
    as_device = device not in (None, "auto") and options.get("engine") in (None, "auto")
    options = {**options, "engine": requested_engine(options.get("engine"), device)}
    explicit = explicit_options({**options, "corpus": None if sentences is not None else corpus})
    explicit = _dropped(explicit, no_eval=checked_bool("no_eval", no_eval),
                        no_probe=checked_bool("no_probe", no_probe))
    if on_progress is not None and not callable(on_progress):
        raise InputError(f"on_progress= must be a function taking a Progress, got "
                         f"{clip(repr(on_progress))}")
    from embedlab.engines import asked_as_device
    from embedlab.run.folder import ABANDONED
    from embedlab.run.signals import Terminated

    abandoned = ABANDONED.set(None)
    try:
        once = (*(("--restart",) if restart else ()),
                # --from latest is where a plain resume starts: typed again, it resumes alike
                *(("--from",) if from_checkpoint not in (None, "latest") else ()))
        with asked_as_device(as_device), acting_once(*once):
            return _train_call(explicit, sentences, run, runs_dir, preset, restart,
                               from_checkpoint, on_progress)
    except Terminated as exc:  # SIGTERM or SIGHUP while the run was set up (or after it ended)
        stopped = TrainingInterrupted(f"stopped by {signal.Signals(exc.signum).name} before "
                                      f"training began or after it ended; {_checkpoints_now()} "
                                      f"— {_again(sentences)}", 128 + exc.signum)
        stopped.printed_by_another = said_by_another_process()  # torchrun signals them all
        raise stopped from None
    except KeyboardInterrupt as exc:
        from embedlab.training.reporting import FINAL_CALLBACK_RAISED

        if isinstance(exc, TrainingInterrupted):  # saved, and said so
            raise
        if getattr(exc, FINAL_CALLBACK_RAISED, False):  # on_progress's last call: all saved
            raise
        # Ctrl-C while the corpus was prepared or the run set up: the same words as SIGTERM's
        kind = TrainingKeyboardInterrupt if python_caller() else TrainingInterrupted
        stop = kind("stopped by SIGINT before training began or after it ended; "
                    f"{_checkpoints_now()} — {_again(sentences)}", 128 + signal.SIGINT)
        stop.printed_by_another = said_by_another_process()  # every process got the Ctrl-C
        raise stop from None
    finally:
        ABANDONED.reset(abandoned)


def _again(sentences: Iterable[Sequence[str]] | None) -> str:
    """How to start again: the same call, or, where the sentences were an iterator (a
    generator) that the stopped call has used up, the call with a new one."""
    if isinstance(sentences, Iterator):  # not iter(): a second __iter__ may read or raise
        return ("call embedlab.train again with a new iterator of the sentences (this one "
                "is used up) and the same other arguments")
    return rerun()


def _checkpoints_now() -> str:
    """What a stop before training left of the run's checkpoints: as they were, or, after
    ``--from`` moved the newer ones aside, where they went."""
    from embedlab.run.folder import ABANDONED

    moved = ABANDONED.get()
    if moved is None:
        return "the run's checkpoints are as they were"
    step, folder = moved
    return (f"{spell_name('--from', python='from_checkpoint')} had moved the checkpoints newer "
            f"than step {step} to {folder}, and the run resumes from step {step}")


def _check_path(name: str, value: object, *, optional: bool = False) -> None:
    """``run=``/``runs_dir=``: a folder's path, as a str or os.PathLike (bytes told how)."""
    if isinstance(value, str) and not value:  # "$RUN" of an unset variable: not the cwd
        flag = "--" + name.replace("_", "-")
        example = "runs/exp1" if name == "run" else "runs"
        raise InputError(f"{spell_name(flag)} is empty (an unset variable?); pass a folder, "
                         f"e.g. {spell(flag, example)}")
    if (optional and value is None) or isinstance(value, (str, os.PathLike)):
        return
    if isinstance(value, (bytes, bytearray)):
        raise InputError(f"{name}= is bytes ({clip(repr(value))}); pass the path as a str "
                         f"({name}={os.fsdecode(bytes(value))!r})")
    raise InputError(f"{name}= must be a folder's path (a str or os.PathLike), got "
                     f"{type(value).__name__} {clip(repr(value))}")


def _check_iterable(corpus: object) -> None:
    """``corpus=`` that is neither a path nor sentences, refused before anything is read."""
    if isinstance(corpus, (bytes, bytearray)):
        raise InputError(f"corpus= is bytes ({clip(repr(corpus))}); pass a path as a str "
                         f"(corpus={os.fsdecode(bytes(corpus))!r}) or an iterable of sentences, "
                         "each a list of words")
    if not isinstance(corpus, Iterable):
        raise InputError(f"corpus= must be a path (a str or os.PathLike), 'demo', 'text8' or an "
                         f"iterable of sentences (lists of words), got {type(corpus).__name__} "
                         f"{clip(repr(corpus))}")


def _checked_from(value: object) -> str | os.PathLike[str] | None:
    """``from_checkpoint=``: a checkpoint folder, its name, ``"best"``, ``"latest"`` or its step
    (an int)."""
    if value is None or isinstance(value, (str, os.PathLike)):
        return value
    step = step_number(value)
    if step is not None:
        return str(step)  # the step, as --from STEP takes it
    raise InputError(f"from_checkpoint= must be a checkpoint of the run (its step, its folder, "
                     f"'best' or 'latest'), got {type(value).__name__} {clip(repr(value))}; pass "
                     "e.g. from_checkpoint=1000 (list them: embedlab.checkpoints(run))")


def _train_call(explicit: dict[str, Any], sentences: Iterable[Sequence[str]] | None,
                run: str | os.PathLike[str] | None, runs_dir: str | os.PathLike[str],
                preset: str | None, restart: bool,
                from_checkpoint: str | os.PathLike[str] | None,
                on_progress: Callable[[Progress], object] | None) -> TrainResult:
    with contextlib.ExitStack() as stack:
        group = stack.enter_context(distributed.joined())  # under torchrun: its processes
        if group is not None:
            if not group.leader:
                stack.enter_context(distributed.echoed_once(group))
            if sentences is not None:
                raise InputError("sentences in memory (an iterable corpus=) cannot be shared by "
                                 "the processes torchrun starts; write them to a file, one "
                                 "sentence per line, and pass its path")
            handshake.agree_on_arguments(group, _arguments(explicit, run, runs_dir, preset,
                                                           restart, from_checkpoint))
            if not group.leader:
                from embedlab.training.following import follow

                return follow(group, threads=explicit.get("threads", 0),
                              corpus=explicit.get("data", {}).get("corpus"))
            stack.enter_context(handshake.leading(group))
        if on_progress is not None:
            from embedlab.training.reporting import progress_to

            stack.enter_context(progress_to(on_progress))
        if sentences is not None:
            from embedlab.run.signals import terminate_as_interrupt

            # a SIGTERM while they are written unwinds as Ctrl-C does: the partial file and
            # the folders made for it go, and the stop is said (it killed the process there)
            with terminate_as_interrupt():
                explicit = _with_sentences(stack, sentences, explicit, preset, run, runs_dir,
                                           restart)
        return _run(explicit, run, runs_dir, preset, restart, from_checkpoint)


def _arguments(explicit: dict[str, Any], run: str | os.PathLike[str] | None,
               runs_dir: str | os.PathLike[str], preset: str | None, restart: bool,
               from_checkpoint: str | os.PathLike[str] | None) -> dict[str, Any]:
    """A call's arguments as JSON values, which every process of a run must share (threads
    apart: each machine may have its own cores). The options are compared by their effect —
    the settings they give with the defaults and the preset, under the names of their flags —
    so that ``--seed 1`` and no ``--seed`` (whose default is 1) agree."""
    from embedlab.config import TrainConfig, apply_preset, flatten

    cfg = TrainConfig.from_dict(apply_preset(preset, explicit))
    settings = {**flatten(cfg.to_dict()), "engine": cfg.engine_for()}
    names = {f"{section}.{key}" if section else key: name
             for name, (section, key) in OPTIONS.items()}
    options = {spell(f"--{names[k].replace('_', '-')}") if k in names else k: v
               for k, v in settings.items() if k != "threads"}
    return {"options": options, "run": None if run is None else os.fspath(run),
            "runs_dir": os.fspath(runs_dir), "preset": preset, "restart": restart,
            "from": None if from_checkpoint is None else os.fspath(from_checkpoint),
            "corpus": explicit.get("data", {}).get("corpus")}


def _with_sentences(stack: contextlib.ExitStack, sentences: Iterable[Sequence[str]],
                    explicit: dict[str, Any], preset: str | None,
                    run: str | os.PathLike[str] | None, runs_dir: str | os.PathLike[str],
                    restart: bool) -> dict[str, Any]:
    """``explicit`` with the corpus named by the label of ``sentences``, written for the length
    of the call beside the run folder (:func:`embedlab.data.sentences.written`).

    Read before the run folder is chosen, since a new run's name holds the label; the options,
    the folder paths and, for a run that exists, its stored config are checked first, so that
    a mistake there does not use the sentences (a generator) up.
    """
    from embedlab.config import TrainConfig, apply_preset
    from embedlab.data.sentences import NoSentences, SentencesRaised, written

    TrainConfig.from_dict(apply_preset(preset, explicit))  # a bad option, refused now
    resumes = False
    if run is None:
        check_runs_dir(Path(runs_dir))
        folder = Path(runs_dir)
    else:
        check_run_dir(Path(run))
        folder = Path(os.path.abspath(run)).parent
        resumes = not restart and Path(run).is_dir() and \
            any((Path(run) / "checkpoints").glob("ckpt-*"))
        if resumes:  # another dim= than the run's, refused before the sentences are read
            resolve_config(Path(run), explicit, preset, say=False)
    made = missing_folders(folder)
    stack.callback(remove_empty_folders, made)  # runs after the file is deleted
    where = spell("--run") if run is not None else spell("--runs-dir")
    theirs: OSError | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        label = stack.enter_context(written(sentences, folder)).label
    except SentencesRaised as exc:  # the caller's own error, as any other their iterator raises
        theirs = exc.error
    except OSError as exc:  # a read-only folder, a full disk
        raise write_error(folder, exc, where) from None
    except NoSentences as exc:
        if not resumes or run is None:
            raise
        raise NoSentences(f"{exc}; or corpus=None to resume run {run} from the copy of its "
                          f"sentences in {Path(run) / 'prepared'}") from None
    if theirs is not None:  # raised outside the handler: its cause and context stay theirs
        raise theirs
    return {**explicit, "data": {**explicit.get("data", {}), "corpus": label}}


def _run(explicit: dict[str, Any], run: str | os.PathLike[str] | None,
         runs_dir: str | os.PathLike[str], preset: str | None, restart: bool,
         from_checkpoint: str | os.PathLike[str] | None) -> TrainResult:
    """:func:`train` once the options are checked and the corpus named."""
    if run is None:
        check_runs_dir(Path(runs_dir))
        run_dir = choose_run_dir(Path(runs_dir), explicit, preset)
        # the name of a run with these settings (to resume), or a free one (a new run)
        new = not (run_dir / CONFIG_FILE).exists()
        try:
            return _run_in(run_dir, explicit, None, preset, restart, from_checkpoint)
        except RunInUse:
            # Two commands of other settings, started together, both found the name free;
            # the other one took it first. Its folder is there now, so the name is chosen
            # again (the same command twice is refused: one run, in use).
            from embedlab.run.lock import RunLock

            holder = RunLock.held_by(run_dir) or {}
            again = choose_run_dir(Path(runs_dir), explicit, preset)
            # the same command: its words after the program's name (embedlab, python -m ...)
            same = isinstance(holder.get("argv"), list) and holder["argv"][1:] == typed_argv()[1:]
            if not new or again == run_dir or same:
                raise
            return _run_in(again, explicit, None, preset, restart, from_checkpoint)
    return _run_in(Path(run), explicit, run, preset, restart, from_checkpoint)


def _run_in(run_dir: Path, explicit: dict[str, Any], run: str | os.PathLike[str] | None,
            preset: str | None, restart: bool,
            from_checkpoint: str | os.PathLike[str] | None) -> TrainResult:
    """:func:`_run` in ``run_dir``: the folder ``run`` names, or the one chosen for it."""
    check_run_dir(run_dir)
    if restart and from_checkpoint:
        raise InputError(f"{spell('--restart', True)} and {_from()} exclude each other; pass one")
    same_settings, renewed = False, []
    init_from = explicit.get("init_from")
    if restart and init_from and run_dir.is_dir() and (
            Path(init_from).resolve() == run_dir.resolve()
            or run_dir.resolve() in Path(init_from).resolve().parents):
        # the restart moves the run aside before the warm start reads it: it was "no
        # checkpoints", after the move and its undoing
        raise InputError(f"{spell_name('--init-from')} {init_from} is inside the run "
                         f"{spell('--restart', True)} moves aside; copy from another run, or "
                         f"restart without {spell_name('--init-from')}")
    if restart:
        # "--run . --restart" must name a sibling folder, not fail in with_name; other paths
        # stay as given, so that the lines printed and the result name the run as the user did
        if run_dir.name in ("", ".", ".."):
            run_dir = Path(os.path.abspath(run_dir))
        if run_dir.is_symlink() and run_dir.is_dir():
            # a link to the run on another disk: the run is moved aside beside itself and the
            # new one made there, where the link points (moving the link would leave the old
            # run in place and make the new one beside the link)
            run_dir = Path(os.path.realpath(run_dir))
        if run_dir.is_dir():
            from embedlab.config import TrainConfig, apply_preset, check_new_run
            from embedlab.run.folder import say_restart_engine

            given = explicit
            explicit, preset = _restarted(run_dir, explicit, preset)
            same_settings = explicit is not given
            if same_settings:
                from embedlab.run.folder import renewed_on_restart

                renewed = renewed_on_restart(run_dir, given)
            # a bad value (--lr -1, --sample 1.5) is refused before the old run is moved aside
            # (and back)
            check_new_run(TrainConfig.from_dict(apply_preset(preset, explicit)), explicit)
            say_restart_engine(run_dir, given)
    if run is not None and _no_run_yet(run_dir) and "corpus" not in explicit.get("data", {}) \
            and preset is None and from_checkpoint is None:  # --from: refused as no run, below
        # a resume's command with a mistyped folder would otherwise train the demo unannounced
        note(f"{run_dir} is no run yet and no {spell_name('--corpus')} was given: a new run on "
             f"the built-in demo corpus (pass {spell('--corpus')} to train on yours, or check "
             "the path of the run you meant to resume)")
    if run_dir.parent.is_dir():  # a killed call's sentences, here whatever this call trains on
        from embedlab.data.sentences import remove_orphans

        remove_orphans(run_dir.parent)
    made = missing_folders(run_dir.parent)  # the child's folder beside the run creates them
    from embedlab.run.signals import terminate_as_interrupt

    try:
        # a SIGTERM while the run is set up unwinds as Ctrl-C does: the half-made run goes,
        # and --restart puts the old one back (it killed the process where it stood)
        with terminate_as_interrupt(), contextlib.ExitStack() as stack:
            if restart and run_dir.exists():
                from embedlab.training.restart import old_run_moved_aside

                stack.enter_context(old_run_moved_aside(run_dir, same_settings=same_settings,
                                                        renewed=renewed))
            ahead = None if run_dir.exists() else _prepare_ahead(run_dir, explicit, preset)
            if ahead is not None:
                stack.callback(ahead.cancel)
            return _train(run_dir, explicit, preset,
                          None if from_checkpoint is None else os.fspath(from_checkpoint), ahead)
    except BaseException:
        # e.g. an offline corpus="text8" with a new runs_dir: leave no empty one
        remove_empty_folders(made)
        raise


def _no_run_yet(run_dir: Path) -> bool:
    """A folder that does not exist, or an empty one (hidden entries apart)."""
    try:
        return not run_dir.exists() or (run_dir.is_dir() and all(
            p.name.startswith(".") for p in run_dir.iterdir()))
    except OSError:
        return False


def _restarted(run_dir: Path, explicit: dict[str, Any], preset: str | None
               ) -> tuple[dict[str, Any], str | None]:
    """The options and preset of ``--restart``: the run's own, with those given over them
    (:func:`embedlab.run.folder.restart_options`). Another preset than the run's starts over
    from that preset and the options given; so does a run whose config cannot be read."""
    from embedlab.data.prepared import SPECIAL_CORPORA
    from embedlab.data.sentences import is_label

    try:
        stored = stored_config_from_here(run_dir)
    except InputError:  # a damaged config.json: what --restart is for
        stored = None
    if stored is None and "corpus" not in explicit.get("data", {}) and is_a_run(run_dir):
        # the run's settings are lost with its config: the built-in demo (at the defaults or
        # a preset's, which names no corpus) is not what a restart of it means
        raise InputError(f"{spell('--restart', True)}: run {run_dir} has no readable "
                         f"{CONFIG_FILE} to take its settings from; pass "
                         f"{spell('--corpus')} and the other settings of the new run")
    if stored is None or (preset is not None and preset != stored.preset):
        return explicit, preset
    if "corpus" not in explicit.get("data", {}):
        corpus = stored.data.corpus
        if is_label(corpus):  # its sentences are in the folder moved aside
            again = "pass them again as corpus=" if python_caller() else \
                "pass --corpus with a file of them, one sentence per line"
            raise InputError(f"{spell('--restart', True)}: run {run_dir} was trained on "
                             f"sentences given in memory; {again}")
        if corpus not in SPECIAL_CORPORA and not Path(corpus).exists():
            raise InputError(f"{spell('--restart', True)}: {corpus_not_found(run_dir, corpus)}; "
                             f"pass {spell('--corpus')} with its path")
    options = restart_options(run_dir, explicit)
    return (explicit, preset) if options is None else (options, stored.preset)


def explicit_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options given (not None), nested like ``TrainConfig.to_dict()``: what a run's config
    takes from the caller."""
    unknown = [name for name in options if name not in OPTIONS]
    if len(unknown) > 1:
        raise _unknown_options(unknown)
    if unknown:
        raise _unknown_option(unknown[0])
    out: dict[str, Any] = {}
    for name in OPTIONS:
        value = options.get(name)
        if value is None or (isinstance(value, tuple) and not value):
            continue
        if type(value).__module__ == "numpy" and hasattr(value, "item") and \
                getattr(value, "ndim", None) == 0:
            value = value.item()  # np.int64(5) is 5, as config.json writes it
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if name in LISTS:
            value = _listed(name, value)
        section, key = OPTIONS[name]
        if section is None:
            out[key] = value
        else:
            out.setdefault(section, {})[key] = value
    return out


def _dropped(explicit: dict[str, Any], *, no_eval: bool, no_probe: bool) -> dict[str, Any]:
    """``explicit`` with the run's evaluation (``no_eval``) or probe words (``no_probe``) set
    to none, which the stored config's would otherwise fill in on a resume."""
    if no_eval:
        names = ("eval_every", "eval_analogies", "eval_similarity")
        given = [name for name in names if OPTIONS[name][1] in explicit.get("eval", {})]
        if given:
            raise InputError(f"{spell('--no-eval', True)} drops the run's evaluation, and "
                             f"{', '.join(spell_name('--' + n.replace('_', '-')) for n in given)}"
                             " sets it; pass one or the other")
        section, key = OPTIONS["best_metric"]
        best = explicit.get(section or "", {}).get(key)
        if isinstance(best, str) and split_best_metric(best)[0] != "loss":
            # its own fix would be to pass an evaluation file, which --no-eval refuses
            raise InputError(f"{spell('--no-eval', True)} drops the run's evaluation, and "
                             f"{spell('--best-metric', best)} chooses the best checkpoint by "
                             f"it; pass {spell('--best-metric', 'loss')}, or drop "
                             f"{spell_name('--no-eval')}")
        none: dict[str, Any] = {"eval_every": None, "eval_analogies": None, "eval_similarity": []}
        explicit = {**explicit, "eval": {**explicit.get("eval", {}),
                                         **{OPTIONS[n][1]: none[n] for n in names}}}
    if no_probe:
        section, key = OPTIONS["probe"]
        assert section is not None
        if key in explicit.get(section, {}):
            raise InputError(f"{spell('--no-probe', True)} drops the run's probe words, and "
                             f"{spell_name('--probe')} sets them; pass one or the other")
        explicit = {**explicit, section: {**explicit.get(section, {}), key: []}}
    return explicit


def _listed(name: str, value: object) -> list[str]:
    """A repeatable option's values: one str (or path), or an iterable of them."""
    what = "words" if name == "probe" else "files"
    example = "probe=['king', 'queen']" if name == "probe" else f"{name}=['ws353.tsv']"
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
        raise InputError(f"{name}= takes {what} (a str or a list of them), got "
                         f"{type(value).__name__} {clip(repr(value))}; pass e.g. {example}")
    out = []
    for item in value:
        if not isinstance(item, (str, os.PathLike)):
            raise InputError(f"{name}= takes {what} as str, got {type(item).__name__} "
                             f"{clip(repr(item))} among them; pass e.g. {example}")
        out.append(os.fspath(item))
    return out


_OTHER_ARGUMENTS = ("run", "runs_dir", "preset", "restart", "from_checkpoint", "device",
                    "on_progress")


def _unknown_options(names: list[str]) -> InputError:
    """All the unknown options of one call at once, each with what it means here: a ported
    gensim call (vector_size=, workers=, sg=) is told everything in one go."""
    from embedlab.training.spellings import hint as foreign

    told = []
    for name in names:
        known = foreign(name, python=True)
        close = difflib.get_close_matches(name, [*OPTIONS, *_OTHER_ARGUMENTS], n=1)
        if known is not None and known.startswith("no option: "):
            told.append(f"{name}=: {known.removeprefix('no option: ')}")
        elif known is not None:
            told.append(f"{name}= is {known}")
        else:
            told.append(f"{name}=: did you mean {close[0]}=?" if close else
                        f"{name}=: no such option")
    return InputError(f"embedlab.train() got unknown options {', '.join(n + '=' for n in names)}"
                      f"; {'; '.join(told)}; its options are the flags of 'embedlab train' with "
                      "underscores: see help(embedlab.train)")


def _unknown_option(name: str) -> InputError:
    names = [*OPTIONS, *_OTHER_ARGUMENTS]
    from embedlab.training.spellings import hint as foreign

    if name == "nproc":
        return InputError("embedlab.train() has no nproc=: --nproc starts the processes of "
                          "'embedlab train --nproc N' from a shell; a Python call trains in its "
                          "own process (start N of them with torchrun, each making the same "
                          "call)")
    close = [o for o in names if name.startswith(o) or o.startswith(name)][:1] or \
        difflib.get_close_matches(name, names, n=1)
    known = foreign(name, python=True)  # gensim's or word2vec.c's name for an option of ours
    if known is not None and known.startswith("no option: "):
        return InputError(f"embedlab.train() got an unknown option {name}=; "
                          f"{known.removeprefix('no option: ')}")
    hint = f"did you mean {known}? " if known else f"did you mean {close[0]}=? " if close else ""
    return InputError(f"embedlab.train() got an unknown option {name}=; {hint}its options are "
                      "the flags of 'embedlab train' with underscores (dim=, window=, epochs=, "
                      "...): see help(embedlab.train)")


def _prepare_ahead(run: Path, explicit: dict[str, Any], preset: str | None
                   ) -> PrepareAhead | None:
    """A new torch-engine run on a big raw corpus: tokenise it in a child while this process
    imports torch."""
    from embedlab.config import TrainConfig, apply_preset
    from embedlab.data.sentences import is_label
    from embedlab.data.tokenise_child import PrepareAhead, should_prepare_ahead

    cfg = TrainConfig.from_dict(apply_preset(preset, explicit))
    # sentences given in memory are not at hand in a child (embedlab.data.sentences.written_file)
    if is_label(cfg.data.corpus) or not should_prepare_ahead(cfg.data, engine=cfg.engine_for()):
        return None
    return PrepareAhead.start(cfg.data, run, progress=cfg.track.progress and sys.stderr.isatty())


def _train(run: Path, explicit: dict[str, Any], preset: str | None, from_ckpt: str | None,
           ahead: PrepareAhead | None) -> TrainResult:
    from embedlab.engines import engine_module
    from embedlab.run.signals import deferred_interrupt

    with deferred_interrupt():  # numpy: see deferred_interrupt
        from embedlab.training.trainer import train as train_run

    _check_same_sentences(run, explicit)
    cfg, _stored = resolve_config(run if run.exists() else None, explicit, preset)
    if cfg.engine in ("torch", "cuda"):
        # imported now, while a tokenising child works (ahead), not after waiting for it, and
        # before the freeze below; torch's C++ import swallows a Ctrl-C: see deferred_interrupt
        with deferred_interrupt():
            engine_module(cfg.engine)  # imports torch, or says in one line how to install it
    # --from: the trainer moves the newer checkpoints aside once it holds the run's lock and
    # every check has passed, so a refused command leaves them where they were
    resume_from = _resolve_from(run, from_ckpt) if from_ckpt else None
    # The objects imported so far outlive training: freezing them keeps the cyclic collector
    # from rescanning them in every full collection (docs/performance.md).
    gc.freeze()
    try:
        result = train_run(cfg, run, argv=typed_argv(), resume_from=resume_from, ahead=ahead,
                           abandon_newer=resume_from is not None)
    finally:
        gc.unfreeze()  # in-process callers (tests, notebooks) get their collector back
    print(printable(_summary(result, cfg)), file=sys.stderr)  # a folder's line break escaped
    return result


def _summary(result: TrainResult, cfg: TrainConfig) -> str:
    """The line that says how the call ended. The loss is the last logging window's (a run
    stopped by --max-steps logs what an uninterrupted run logs: only whole windows), so where
    the steps since that window are not in it, the line says so."""
    every = cfg.track.log_every
    if result.loss is None:
        loss = f"n/a (no window of {spell('--log-every', every)} steps closed yet)"
    elif not result.finished and result.step % every:
        loss = f"{result.loss:.4f} (the last whole logging window's)"
    else:
        loss = f"{result.loss:.4f}"
    if result.finished:
        state = "finished"
    elif cfg.max_steps is not None and result.step > cfg.max_steps:  # nothing was trained
        state = f"already past {spell('--max-steps', cfg.max_steps)}"
    else:
        state = f"stopped at {spell('--max-steps', cfg.max_steps)}"
    return (f"embedlab: {state}: step {result.step}, {result.words_seen:,} words, loss "
            f"{loss}, {result.train_seconds:.1f} s training; vectors in {result.run_dir}")


def _resolve_from(run: Path, from_ckpt: str) -> str | None:
    """The checkpoint ``--from`` names, checked; None for ``latest``, which is where a resume
    without ``--from`` starts (the newest checkpoint that verifies, found as that resume finds
    it)."""
    from embedlab.checkpoint import CheckpointManager, find_checkpoint
    from embedlab.checkpoint.load import listing_command

    if not run.exists():  # 'best' too: find_checkpoint's "pass a run folder" does not fit
        raise InputError(f"{_from(from_ckpt)}: run {run} does not exist; {_from()} resumes an "
                         f"existing run from one of its checkpoints (leave it out to start "
                         "the run)")
    if from_ckpt == "latest":  # the role `ckpt` lists
        if not CheckpointManager(run).list(check=False):
            raise InputError(f"{_from(from_ckpt)}: {run} has no checkpoints; leave {_from()} "
                             "out to start the run")
        return None
    if from_ckpt == "best":
        from embedlab.checkpoint import INDEX_FILE, ckpt_name, read_index

        index = read_index(run) if (run / "checkpoints").is_dir() else None
        if index is not None and index.best is None and index.latest is not None:
            # find_checkpoint's fix names --best and --step, which train does not take
            raise InputError(f"{_from(from_ckpt)}: {run} has no best checkpoint recorded in "
                             f"{run / INDEX_FILE}; pass one of its checkpoints, e.g. "
                             f"{_from(ckpt_name(index.latest))}, or leave {_from()} out to "
                             "resume from the latest")
        return str(find_checkpoint(run, best=True))
    path = Path(from_ckpt)
    if not path.exists() and (run / "checkpoints" / from_ckpt).exists():
        path = run / "checkpoints" / from_ckpt
    if not path.exists() and re.fullmatch(r"[0-9]+", from_ckpt):  # a step, as 'ckpt' lists
        from embedlab.checkpoint import ckpt_name

        path = run / "checkpoints" / ckpt_name(int(from_ckpt))
    if not path.exists():
        from embedlab.run.lock import RunLock

        RunLock.refuse_if_held(run)  # a run being trained: that, not the step, is the obstacle
        # the generic "pass a run folder" of find_checkpoint does not fit --from
        have = [info.path.name for info in CheckpointManager(run).list(check=False)]
        listed = (f"{run} has {', '.join(have[-3:])}{' and older' if len(have) > 3 else ''}"
                  if have else f"{run} has no checkpoints")
        raise InputError(f"{_from(from_ckpt)}: no such checkpoint ({listed}); pass one of "
                         f"them (or its step), 'best', 'latest' or a checkpoint folder (list them: "
                         f"{listing_command(run)})")
    ckpt = find_checkpoint(path)
    # Another run's checkpoint would continue that run's weights under this run's name, config
    # and history; starting from other vectors is what --init-from is for.
    # resolved as the run's own folders are: RUN/checkpoints may be a link to another disk
    inside = (run.resolve(), (run / "checkpoints").resolve(),
              *(p.resolve() for p in run.glob("checkpoints-abandoned-*")))
    if not any(ckpt.resolve().is_relative_to(folder) for folder in inside):
        raise InputError(f"{_from(from_ckpt)}: {ckpt} is not a checkpoint of run {run}; "
                         f"{_from()} takes the run's own checkpoints (list them: "
                         f"{listing_command(run)}). To start a new run from its vectors, pass "
                         f"{spell('--init-from', from_ckpt)} with a new {spell('--run')}")
    if ckpt.resolve().parent != (run / "checkpoints").resolve():
        # an abandoned branch's checkpoint (checkpoints-abandoned-*/): resumed from there, the
        # run's history would hold two branches, its index neither's checkpoints
        raise InputError(f"{_from(from_ckpt)}: {ckpt} is not one of the run's own checkpoints "
                         f"(in {run / 'checkpoints'}; a branch {_from()} moved aside, or a "
                         f"copy); resume from one of those, or start a new run from it with "
                         f"{spell('--init-from')}")
    return str(ckpt)


def _from(*value: object) -> str:
    """``--from`` as the caller spells it: ``from_checkpoint=`` in Python, where a step is shown
    as the int it was passed as (``from_checkpoint=999``)."""
    if python_caller() and value and isinstance(value[0], str) and value[0].isdigit():
        value = (int(value[0]),)
    return spell("--from", *value, python="from_checkpoint")



def _check_same_sentences(run: Path, explicit: dict[str, Any]) -> None:
    """Refuse sentences other than those a run was trained on, in words that fit them (the
    config's difference, data.corpus, would name two hashes)."""
    from embedlab.data.sentences import is_label

    given = explicit.get("data", {}).get("corpus")
    stored = stored_config(run) if run.is_dir() else None
    if (given is None or stored is None or given == stored.data.corpus
            or not (is_label(given) and is_label(stored.data.corpus))
            or not any((run / "checkpoints").glob("ckpt-*"))):
        return
    raise InputError(f"run {run} was trained on other sentences than corpus= holds (they are "
                     f"{stored.data.corpus}, these {given}); pass the same sentences, or "
                     f"corpus=None: the run keeps its own in {run / 'prepared'}; restart=True "
                     "starts it over, another run= starts a new one")
