"""Messages name what the caller passed: flags for the command line, arguments for Python."""

from __future__ import annotations

import copy
import inspect
import pickle
import threading
from pathlib import Path

import pytest

from embedlab.errors import (
    InputError,
    ProcessLost,
    TrainingInterrupted,
    TrainingKeyboardInterrupt,
    TrainingStoppedByError,
    collecting_warnings,
    import_torch,
    messages_for,
    python_caller,
    python_entry,
    spell,
    spell_metavar,
    spell_name,
    warn,
)


def test_flags_unless_a_python_entry_point_was_called() -> None:
    assert (spell("--dim"), spell("--dim", 100), spell("--force", True)) == \
        ("--dim", "--dim 100", "--force")
    with messages_for("python"):
        assert (spell("--dim"), spell("--dim", 100), spell("--force", True)) == \
            ("dim=", "dim=100", "force=True")
        assert spell("--best-metric", "loss:min") == "best_metric='loss:min'"
        assert spell("--out", Path("runs/a"), python="path") == "path='runs/a'"
        assert spell("--from", python="from_checkpoint") == "from_checkpoint="
    assert spell("--dim") == "--dim"


def test_the_command_line_keeps_its_spelling_through_python_entry_points() -> None:
    @python_entry
    def entry() -> str:
        return spell("--dim", 3)

    assert entry() == "dim=3"
    with messages_for("cli"):
        assert entry() == "--dim 3"
        with messages_for("python"):
            assert spell("--dim") == "--dim"
    assert entry.__name__ == "entry"


def test_a_bare_name_and_a_placeholder_follow_the_caller_too() -> None:
    assert (spell_name("--probe"), spell_metavar("--run", "DIR"), python_caller()) == \
        ("--probe", "--run DIR", False)
    with messages_for("python"):
        assert (spell_name("--min-count"), spell_metavar("--eval-analogies", "FILE")) == \
            ("min_count", "eval_analogies=FILE")
        assert spell_name("--from", python="from_checkpoint") == "from_checkpoint"
        assert spell_metavar("--out", "FILE", python="path") == "path=FILE"
        assert python_caller()
    with messages_for("cli"):
        assert (spell_name("--probe"), spell_metavar("--run", "DIR"), python_caller()) == \
            ("--probe", "--run DIR", False)


def test_refusals_are_value_errors_reachable_from_the_package() -> None:
    """gensim's and Python's refusals of a bad argument are ValueErrors: ``except ValueError``
    catches embedlab's too, and ``embedlab.InputError`` names them without a submodule."""
    import embedlab
    from embedlab.vectors import UnknownWordError

    assert embedlab.InputError is InputError and issubclass(InputError, ValueError)
    assert issubclass(UnknownWordError, KeyError) and issubclass(UnknownWordError, ValueError)
    from embedlab import errors

    assert embedlab.TrainingInterrupted is errors.TrainingInterrupted
    # help() shows the arguments (and gensim's load_word2vec_format options, refused in one
    # line each), not a bare **kwargs
    assert list(inspect.signature(embedlab.load).parameters) == \
        ["path", "step", "best", "limit", "encoding", "gensim_options"]
    assert {"device", "on_progress", "from_checkpoint"} <= set(
        inspect.signature(embedlab.train).parameters)


def test_a_python_call_warns_through_warnings_at_the_callers_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What the command prints as ``embedlab: warning:`` is an EmbedlabWarning for a Python
    caller, located at the caller's line (not inside embedlab), so it can be filtered."""
    import warnings

    import embedlab

    path = tmp_path / "dup.txt"
    path.write_text("3 1\nthe 1\nof 2\nthe 3\n")
    with pytest.warns(embedlab.EmbedlabWarning, match="1 duplicate words") as caught:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        vec = embedlab.load(path)
    assert list(vec.index_to_key) == ["the", "of"]
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]
    assert issubclass(embedlab.EmbedlabWarning, UserWarning)
    assert capsys.readouterr().err == ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", embedlab.EmbedlabWarning)
        embedlab.load(path)
    assert capsys.readouterr().err == ""
    with messages_for("cli"):  # the command's one line
        embedlab.load(path)
    assert capsys.readouterr().err == (
        f"embedlab: warning: {path}: 1 duplicate words; keeping the first vector of each (as "
        "gensim does)\n")


def test_warnings_collected_in_one_thread_stay_in_that_thread(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs saving at once in two threads (each save collects retention's warnings): when
    they enter and leave in crossed order, neither keeps the other's list, and warnings said
    afterwards are said, not collected for good."""
    entered, left_a = threading.Event(), threading.Event()
    got: dict[str, list[str]] = {}

    def a() -> None:
        with collecting_warnings() as said:
            entered.wait()
            warn("from a")
            got["a"] = said
        left_a.set()

    def b() -> None:
        with collecting_warnings() as said:
            entered.set()
            left_a.wait()  # a leaves first: crossed order
            warn("from b")
            got["b"] = said

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {"a": ["from a"], "b": ["from b"]}
    capsys.readouterr()
    warn("said")
    assert capsys.readouterr().err == "embedlab: warning: said\n"


@pytest.mark.parametrize("kind", [TrainingInterrupted, TrainingStoppedByError,
                                  TrainingKeyboardInterrupt, ProcessLost])
def test_stops_survive_pickle_and_copy(kind: type[TrainingInterrupted]) -> None:
    """A stop raised in a multiprocessing worker reaches the parent (a Pool unpickles it)."""
    stop = kind("saved step 3 — re-run the same command to resume", 143)
    stop.printed_by_another = True
    for again in (pickle.loads(pickle.dumps(stop)), copy.deepcopy(stop), copy.copy(stop)):
        assert type(again) is kind and str(again) == str(stop)
        assert (again.exit_code, again.printed_by_another) == (143, True)


def test_a_stop_by_a_signal_is_no_exception_a_stop_by_an_error_is() -> None:
    """As KeyboardInterrupt and SystemExit: ``except Exception`` in a sweep must not swallow
    the user's Ctrl-C or a SIGTERM; the stop an error caused is caught as the error would be."""
    assert not issubclass(TrainingInterrupted, Exception)
    assert not issubclass(TrainingKeyboardInterrupt, Exception)
    assert issubclass(TrainingKeyboardInterrupt, KeyboardInterrupt)
    assert issubclass(TrainingStoppedByError, Exception)
    assert issubclass(ProcessLost, TrainingStoppedByError)


@pytest.mark.parametrize(("text", "one_line", "shown"), [
    ("plain été 語", True, "plain été 語"),
    ("a\nb\rc\u2028d", True, "a\\nb\\rc\\u2028d"),
    ("a\nb\tc", False, "a\nb\tc"),  # a table's own lines and tabs stay
    ("\x1b[31mred\x1b[0m", False, "\\x1b[31mred\\x1b[0m"),
    ("\x00\x07\x7f\x9b", False, "\\x00\\x07\\x7f\\x9b"),
    ("abc\u202edef\u2066", False, "abc\\u202edef\\u2066"),
    ("bad\udcff", True, "bad\\udcff"),  # one character measured, four written: escaped first
    # invisible: words that differ only by one would print alike
    ("wo\u00adrd \u200bw w\u2060 \ufeffw", True, "wo\\xadrd \\u200bw w\\u2060 \\ufeffw"),
    # the joiners shape scripts and emoji: shown as they are
    ("\U0001f468\u200d\U0001f469 \u0915\u094d\u200d", True,
     "\U0001f468\u200d\U0001f469 \u0915\u094d\u200d"),
])
def test_printable_escapes_what_a_terminal_acts_on(text: str, one_line: bool,
                                                   shown: str) -> None:
    from embedlab.errors import printable

    assert printable(text, one_line=one_line) == shown


@pytest.mark.parametrize(("message", "raised"), [
    ("libtorch_cpu.so: failed to map segment from shared object", MemoryError),
    ("libtorch_cpu.so: cannot allocate memory in static TLS block", MemoryError),
    ("No module named 'torch'", InputError),
], ids=["mmap", "tls", "missing"])
def test_torch_that_does_not_fit_in_memory_is_not_called_missing(
        monkeypatch: pytest.MonkeyPatch, message: str, raised: type[Exception]) -> None:
    import importlib.abc
    import sys

    class Failing(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "torch":
                raise ImportError(message)

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Failing(), *sys.meta_path])
    with pytest.raises(raised) as caught:
        import_torch("--engine torch")
    assert ("not installed" in str(caught.value)) == (raised is InputError)


def test_commands_to_paste_quote_their_paths(capsys: pytest.CaptureFixture[str]) -> None:
    """A folder with a space is one shell word (mkdir -p my dir made two); a note's path with
    a line break stays on its line."""
    from embedlab.errors import make_folder, note

    with messages_for("cli"):
        assert make_folder("my dir/sub") == "mkdir -p 'my dir/sub'"
    note("run nl\nrun is new")
    assert capsys.readouterr().err == "embedlab: note: run nl\\nrun is new\n"
