"""What the commands print their tables on (embedlab.cli.output), and standard streams a shell
closed or redirected: whole rows in a pipe, no markup read from names, SIGPIPE's status, no
traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from embedlab.checkpoint import CheckpointManager
from embedlab.errors import InputError
from embedlab.fsutil import output_target

LONG = "http://example.com/" + "x" * 100  # 119 characters


@pytest.fixture
def vectors(tmp_path: Path) -> Path:
    """A word2vec text file whose words include one of 119 characters and one like markup."""
    words = ["a", "b", LONG, "[red]", *(f"w{i}" for i in range(40))]
    rng = np.random.default_rng(0)
    rows = [f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=3)) for w in words]
    path = tmp_path / "v.txt"
    path.write_text(f"{len(words)} 3\n" + "\n".join(rows) + "\n")
    return path


def embedlab(*args: str | Path, env: dict[str, str] | None = None, shell_suffix: str = ""
             ) -> subprocess.CompletedProcess[str]:
    """``embedlab ARGS`` in a fresh process (a shell when ``shell_suffix`` redirects)."""
    command = [sys.executable, "-m", "embedlab", *map(str, args)]
    if shell_suffix:
        quoted = " ".join(f"'{c}'" for c in command)
        return subprocess.run(["sh", "-c", f"{quoted} {shell_suffix}"], capture_output=True,
                              text=True, timeout=120, env={**os.environ, **(env or {})})
    return subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("columns", [None, "0", "20"])
def test_a_table_in_a_pipe_has_whole_rows_whatever_columns_says(
        vectors: Path, columns: str | None) -> None:
    """Piped, rows were fitted to 80 columns (a long word cut to "…"); COLUMNS=0 printed
    nothing and exited 0."""
    env = {"COLUMNS": columns} if columns is not None else {}
    done = embedlab("neighbors", vectors, "a", "-k", "50", env=env)
    assert done.returncode == 0, done.stderr
    assert LONG in done.stdout and "[red]" in done.stdout and "…" not in done.stdout


def test_a_run_folder_named_like_markup_is_printed_as_it_is(tmp_path: Path) -> None:
    """``[/b]`` in a folder name stopped ckpt (and runs over its parent) with a markup error;
    ``exp[v2]`` printed as ``exp``."""
    for name in ("exp[v2]", "[/b]"):
        run = tmp_path / name / "run"
        CheckpointManager(run).save(1, {"input_embeddings": np.zeros((2, 2), np.float32)}, {})
        done = embedlab("ckpt", run)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert f"checkpoints of {run}" in done.stdout


def test_a_table_whose_reader_is_gone_ends_as_sigpipe_would(vectors: Path) -> None:
    """``embedlab ckpt --verify | true``: rich's own exit status 1 is ckpt --verify's word
    for a failed checkpoint."""
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.Popen([sys.executable, "-m", "embedlab", "neighbors", str(vectors), "a"],
                            stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGPIPE and b"Traceback" not in err, err


@pytest.mark.parametrize(("closed", "word", "code"), [
    (">&-", "a", 0), ("2>&-", "a", 0), ("<&-", "a", 0), ("2>&-", "nosuchword", 2)])
def test_a_closed_standard_stream_is_no_traceback(vectors: Path, closed: str, word: str,
                                                 code: int) -> None:
    """A stream the shell closed is None in Python: the first write or flush of it was an
    AttributeError (exit 1), after the work was done or in place of a refusal's 2."""
    done = embedlab("neighbors", vectors, word, shell_suffix=closed)
    assert done.returncode == code and "Traceback" not in done.stderr, done.stderr


def test_eval_of_standard_input_closed_is_one_line(vectors: Path) -> None:
    done = embedlab("eval", vectors, "--analogies", "-", shell_suffix="<&-")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("embedlab: error: ")


@pytest.mark.parametrize("path", ["/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/1"])
def test_a_write_never_replaces_a_standard_stream_redirected_to_a_file(path: str) -> None:
    """``( echo before; embedlab export RUN --out /dev/stdout --force ) > log``: /dev/stdout
    resolves to log, which the rename replaced, losing the shell's lines around it."""
    with pytest.raises(InputError, match="names an open file of this process"):
        output_target(Path(path))


def test_a_refusal_whose_reader_is_gone_keeps_its_status(vectors: Path) -> None:
    """``embedlab neighbors V nosuchword 2>&1 | true``: the error line met the closed pipe
    inside the handler, a traceback with status 1 instead of the refusal's 2."""
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.Popen([sys.executable, "-m", "embedlab", "neighbors", str(vectors),
                             "nosuchword"], stdout=write, stderr=write)
    os.close(write)
    assert proc.wait(timeout=120) == 2


def test_a_stream_that_cannot_encode_a_word_escapes_it(tmp_path: Path) -> None:
    """PYTHONIOENCODING=ascii: a table with café (or eval's ×) was a UnicodeEncodeError."""
    path = tmp_path / "v.txt"
    path.write_text("3 2\ncafé 1 0\nthé 0.9 0.1\nb 0 1\n", encoding="utf-8")
    done = embedlab("neighbors", path, "café", env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "th\\xe9" in done.stdout


def test_embedlab_alone_shows_its_help_on_stderr() -> None:
    """Exit 2 is a usage error; its help went to stdout, where results go."""
    done = embedlab()
    assert done.returncode == 2 and done.stdout == ""
    assert "Usage: embedlab" in done.stderr


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["train", "--help"]])
def test_help_whose_reader_is_gone_ends_as_sigpipe_would(args: list[str]) -> None:
    """``embedlab --help | true``: click's own handling of the closed pipe exited 1."""
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.Popen([sys.executable, "-m", "embedlab", *args], stdout=write,
                            stderr=subprocess.PIPE)
    os.close(write)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGPIPE and b"Traceback" not in err, err


def test_words_holding_terminal_controls_print_escaped(tmp_path: Path) -> None:
    """A word holding ESC (clear screen, colours) or a bidirectional override was written to
    the terminal as it was, which acted on it."""
    from embedlab.vectors import Vectors

    words = ["a", "\x1b[2Jclear", "r\u202eight", "b"]
    m = np.random.default_rng(0).standard_normal((len(words), 3)).astype(np.float32)
    path = Vectors(words, m).to_word2vec(tmp_path / "v.txt")
    done = embedlab("neighbors", path, "a", "-k", "3")
    assert done.returncode == 0, done.stderr
    assert "\\x1b[2Jclear" in done.stdout and "r\\u202eight" in done.stdout
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout


@pytest.mark.parametrize("name", ["crlf\r", "ff\x0cx\x0by", "nl\nsecond", "nel\x85x",
                                  "bad\udcff\udcfe"])
def test_run_folders_with_line_breaks_or_undecodable_bytes_print_escaped(
        tmp_path: Path, name: str) -> None:
    """A folder named "crlf\\r" (a CRLF shell script) printed as "crlf", which no command
    found; "nl\\nsecond" as two lines; undecodable bytes were measured as one character
    each and written as four (\\udcff), which shifted a table's border."""
    from embedlab.errors import printable

    run = tmp_path / name
    CheckpointManager(run).save(1, {"input_embeddings": np.zeros((2, 2), np.float32)}, {})
    done = embedlab("ckpt", run, env={"PYTHONIOENCODING": "utf-8:strict"})
    assert done.returncode == 0, done.stderr
    assert f"checkpoints of {printable(str(run))}" in done.stdout
    assert not any(c in done.stdout for c in "\r\x0b\x0c\x85")


def test_the_lines_that_say_what_was_made_keep_a_line_break_in_a_name_escaped(
        tmp_path: Path) -> None:
    """prepare's summary, train's new-run and end lines and export's line escape a line break
    in a folder's name, as errors and tables do: each stays one line."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("x y z x y\n")
    out, run, vec = tmp_path / "o\nut", tmp_path / "r\nnl", tmp_path / "e\nx.vec"
    done = embedlab("prepare", corpus, "--out", out, "--min-count", "1", "--no-progress")
    assert done.returncode == 0 and done.stdout.startswith("prepared ")
    assert done.stdout.count("\n") == 1 and "o\\nut: " in done.stdout, done.stdout
    done = embedlab("train", "--corpus", corpus, "--min-count", "1", "--sample", "0", "--dim", "4",
                    "--epochs", "1", "--threads", "1", "--no-tensorboard", "--no-progress",
                    "--run", run)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].endswith("new run " + str(tmp_path) + "/r\\nnl"), lines
    assert lines[-1].endswith("vectors in " + str(tmp_path) + "/r\\nnl"), lines
    done = embedlab("export", run, "--out", vec)
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stdout
    assert "e\\nx.vec (3 words × 4 dims)" in done.stdout


def test_an_error_naming_a_path_with_a_newline_is_one_line(tmp_path: Path) -> None:
    done = embedlab("neighbors", tmp_path / "no\nsuch\x1b[31m", "king")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no\\nsuch\\x1b[31m" in done.stderr, done.stderr


def test_a_c_locale_escapes_what_ascii_cannot_write_and_reads_typed_words_as_utf8(
        tmp_path: Path) -> None:
    """LC_ALL=C: stdout is ASCII with surrogateescape, which raises for thé or ×; café typed
    arrives as 'caf\\udcc3\\udca9', which the UTF-8 vocabulary holds as café."""
    path = tmp_path / "v.txt"
    path.write_text("3 2\ncafé 1 0\nthé 0.9 0.1\nb 0 1\n", encoding="utf-8")
    env = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
    done = embedlab("neighbors", path, "café", env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "th\\xe9" in done.stdout
    done = embedlab("analogy", path, "b", "café", "thé", "-k", "1", env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_lines_of_the_commands_are_escaped_like_the_tables_in_an_ascii_stream(
        tmp_path: Path) -> None:
    """click.echo without a file swaps an ASCII stdout for a UTF-8 one of its own: export's
    'wrote ... ×' line must be escaped as tables and warnings are, not raw UTF-8 bytes."""
    path = tmp_path / "v.txt"
    path.write_text("3 2\ncafé 1 0\nthé 0.9 0.1\nb 0 1\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "embedlab", "export", str(path), "--out",
                           str(tmp_path / "y é.txt")], capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii() and b"y \\xe9.txt (3 words \\xd7 2 dims)" in done.stdout


def test_a_table_lines_up_what_an_ascii_stream_escapes(tmp_path: Path) -> None:
    """The columns are measured on 'caf\\xe9' as shown, not on café: rows stay aligned."""
    path = tmp_path / "v.txt"
    path.write_text("3 2\ncafé 1 0\nthé 0.9 0.1\nb 0 1\n", encoding="utf-8")
    done = embedlab("neighbors", path, "b", env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()[1:]  # the header and the rows, cosines right-aligned
    assert len(lines) == 3 and len({len(line.rstrip()) for line in lines}) == 1, done.stdout
