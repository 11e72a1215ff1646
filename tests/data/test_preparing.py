"""Preparing a corpus: what prepare() writes, atomic replacement, refusal of bad input,
warnings, clean-up after errors and signals."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from embedlab.data import preparing, token_ids
from embedlab.data.prepared import PreparedCorpus, is_prepared
from embedlab.data.preparing import prepare
from embedlab.data.vocab import Vocab
from embedlab.errors import InputError

# these library functions are the commands' own: their messages as the commands give them
pytestmark = pytest.mark.usefixtures("cli_messages")


def decode(pc: PreparedCorpus) -> list[list[str]]:
    return [[pc.vocab.words[i] for i in s] for s in pc.sentences()]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def test_prepare_writes_ids_vocab_and_meta(corpus_file: Path, tmp_path: Path) -> None:
    pc = prepare(corpus_file, tmp_path / "out", min_count=2, progress=False)
    assert pc.vocab.words == ("the", "cat", "sat")
    assert decode(pc) == [["the", "cat", "sat", "the"], ["the", "sat"], ["the", "cat"]]
    assert pc.sentence_ends.tolist() == [4, 6, 8]
    assert pc.ids.dtype == np.dtype("<u4") and isinstance(pc.ids, np.memmap)
    assert not pc.ids.flags.writeable
    m = pc.meta
    assert (m["raw_tokens"], m["tokens"], m["sentences"], m["vocab_size"]) == (14, 8, 3, 3)
    assert pc.raw_tokens == 14
    assert m["source"] == str(corpus_file.resolve()) and m["pruned"] is None
    assert m["source_files"][0]["size"] == corpus_file.stat().st_size
    assert (tmp_path / "out" / "ids.u32").stat().st_size == 8 * 4
    assert is_prepared(tmp_path / "out") and not is_prepared(tmp_path)
    assert leftovers(tmp_path) == []


def test_folder_and_compressed_corpus(tmp_path: Path) -> None:
    import gzip
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "1.txt").write_text("a b\n", encoding="utf-8")
    (tmp_path / "src" / "2.txt.gz").write_bytes(gzip.compress(b"b c"))
    pc = prepare(tmp_path / "src", tmp_path / "out", min_count=1, progress=False)
    assert decode(pc) == [["a", "b"], ["b", "c"]]
    assert len(pc.meta["source_files"]) == 2


def test_the_invalid_utf8_warning_of_a_folder_names_its_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "texts"
    src.mkdir()
    for name, bad in (("a.txt", 1), ("b.txt", 3), ("c.txt", 0), ("d.txt", 2), ("e.txt", 1)):
        (src / name).write_bytes(b"good \xff word " * bad + b"good " * 100)
    prepare(src, tmp_path / "out", min_count=1, progress=False)
    assert capsys.readouterr().err.splitlines() == [
        f"embedlab: warning: replaced 7 invalid UTF-8 sequences in {src} (in b.txt: 3, d.txt: "
        "2, a.txt: 1 and 1 more file(s)) with U+FFFD (words that differ only there became one "
        "word); re-encode the corpus as UTF-8 if that is wrong"]


def test_the_invalid_utf8_warning_of_one_file_names_it_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "c.txt").write_bytes(b"good \xff word " + b"good " * 100)
    monkeypatch.chdir(tmp_path)
    prepare("./c.txt", tmp_path / "out", min_count=1, progress=False)
    assert capsys.readouterr().err.startswith(
        "embedlab: warning: replaced 1 invalid UTF-8 sequences in ./c.txt with U+FFFD")


def test_invalid_utf8_gives_one_warning_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "c.txt"
    src.write_bytes(b"good \xff word " * 3 + b"good " * 100)
    pc = prepare(src, tmp_path / "out", min_count=1, progress=False)
    err = capsys.readouterr().err.splitlines()
    assert err == [f"embedlab: warning: replaced 3 invalid UTF-8 sequences in {src} with U+FFFD "
                   "(words that differ only there became one word); re-encode the corpus as "
                   "UTF-8 if that is wrong"]
    assert pc.meta["invalid_utf8"] == 3


def test_pruning_gives_a_warning_and_meta(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "c.txt"
    src.write_text("a a a a b c d e f\n", encoding="utf-8")
    pc = prepare(src, tmp_path / "out", min_count=1, max_distinct=3, progress=False)
    err = capsys.readouterr().err.splitlines()
    assert err == ["embedlab: warning: more than 3 distinct words (--max-distinct 3): pruned rare "
                   "words 1 time(s) while counting (up to count 1; 3 occurrences dropped), so "
                   "counts are approximate and words near --min-count may be missing from the "
                   "vocabulary; raise --max-distinct for exact counts"]
    # pruned as 'd' made a fourth word (b, c, d dropped), like word2vec.c; e and f come after
    assert pc.meta["pruned"] == {"times": 1, "threshold": 1, "dropped_types": 3,
                                 "dropped_tokens": 3}
    assert pc.vocab.words == ("a", "e", "f")


# ---- bad input: refused, and nothing on disk damaged --------------------------------------------
def test_out_is_a_file(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_bytes(b"precious")
    with pytest.raises(InputError, match=r"--out .*out is a file; pass a new folder name"):
        prepare(corpus_file, out, min_count=1, progress=False)
    assert out.read_bytes() == b"precious" and leftovers(tmp_path) == []


def test_out_is_a_non_empty_other_folder(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty and holds no prepared corpus"):
        prepare(corpus_file, out, min_count=1, force=True, progress=False)
    assert snapshot(out) == {"notes.txt": b"mine"}


def test_empty_out_folder_is_used(corpus_file: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    assert prepare(corpus_file, tmp_path / "out", min_count=1, progress=False).meta["tokens"] == 14


def test_existing_prepared_needs_force(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    before = snapshot(out)
    with pytest.raises(InputError, match="already holds a prepared corpus; pass --force"):
        prepare(corpus_file, out, min_count=1, progress=False)
    assert snapshot(out) == before
    pc = prepare(corpus_file, out, min_count=1, force=True, progress=False)
    assert pc.meta["min_count"] == 1 and len(pc.vocab) > 3
    assert leftovers(tmp_path) == []


def test_a_prepare_that_finishes_first_is_not_replaced_by_one_without_force(
        corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two prepares into one new --out: the second to finish was committed over the first."""
    out = tmp_path / "out"
    count = token_ids.count
    first = tmp_path / "first.txt"
    first.write_text("alpha beta gamma\n" * 20)

    def another_prepare_finishes_meanwhile(*args: object, **kwargs: object) -> object:
        monkeypatch.setattr(token_ids, "count", count)
        prepare(first, out, min_count=1, progress=False)
        return count(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(token_ids, "count", another_prepare_finishes_meanwhile)
    with pytest.raises(InputError, match="already holds a prepared corpus; pass --force"):
        prepare(corpus_file, out, min_count=1, progress=False)
    assert PreparedCorpus.open(out).vocab.words == ("alpha", "beta", "gamma")
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("target", ["missing", "empty"])
def test_an_out_that_is_a_link_is_written_where_it_points(
        corpus_file: Path, tmp_path: Path, target: str) -> None:
    """--out on another disk through a link: the link stays, the corpus is at its target (a
    prepared one there: test_force_through_a_symbolic_link_replaces_the_corpus_where_it_points)."""
    disk = tmp_path / "disk" / "prep"
    if target == "empty":
        disk.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(disk)
    pc = prepare(corpus_file, link, min_count=1, progress=False)
    assert link.is_symlink() and is_prepared(disk) and pc.meta["min_count"] == 1
    assert leftovers(tmp_path) == [] and leftovers(disk.parent) == []


def test_force_never_deletes_other_files_beside_a_prepared_corpus(corpus_file: Path,
                                                                 tmp_path: Path) -> None:
    """--force replaces a folder of nothing but a prepared corpus's files: notes, a subfolder,
    or the very corpus being prepared, put inside it, are refused, not deleted with it."""
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    inside = out / "my.txt"
    inside.write_bytes(corpus_file.read_bytes())
    (out / "sub").mkdir()
    before = snapshot(out)
    with pytest.raises(InputError) as e:
        prepare(inside, out, min_count=1, force=True, progress=False)
    assert str(e.value) == (f"--out {out} holds a prepared corpus and other files (my.txt, sub), "
                            "which --force would delete with it; move them out of the folder, "
                            "or choose another folder")
    assert snapshot(out) == before and inside.is_file()
    inside.unlink()
    (out / "sub").rmdir()
    assert prepare(corpus_file, out, min_count=1, force=True, progress=False).meta[
        "min_count"] == 1


def test_force_through_a_symbolic_link_replaces_the_corpus_where_it_points(
        corpus_file: Path, tmp_path: Path) -> None:
    # written through, as export --out and train --run are: the link stays, the corpus it
    # points to is replaced, and no hidden '.out.old-*' is left beside either
    target = tmp_path / "data" / "real"
    prepare(corpus_file, target, min_count=2, progress=False)
    link = tmp_path / "out"
    link.symlink_to(target, target_is_directory=True)
    pc = prepare(corpus_file, link, min_count=1, force=True, progress=False)
    assert pc.meta["min_count"] == 1 and link.is_symlink()
    assert PreparedCorpus.open(target).meta["min_count"] == 1
    assert leftovers(tmp_path) == [] and leftovers(target.parent) == []


def test_a_prepared_folder_that_lost_its_meta_json_is_replaced_as_its_message_says(
        corpus_file: Path, tmp_path: Path) -> None:
    from embedlab.data.corpus import iter_blocks

    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    (out / "meta.json").unlink()
    with pytest.raises(InputError) as e:
        list(iter_blocks(out))
    assert str(e.value).endswith(f"re-create it with 'embedlab prepare CORPUS --out {out} "
                                 "--force'")
    assert prepare(corpus_file, out, min_count=1, force=True, progress=False).meta["min_count"] == 1


def test_force_replaces_a_damaged_prepared_folder(corpus_file: Path, tmp_path: Path) -> None:
    # Opening it says "re-create it with 'embedlab prepare CORPUS --out DIR --force'"; that
    # command must then work, while a folder of other files stays protected even with --force.
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    (out / "meta.json").write_text('{"format": "embedlab-prep')
    with pytest.raises(InputError, match="not a valid prepared corpus"):
        PreparedCorpus.open(out)
    with pytest.raises(InputError, match="holds a damaged prepared corpus; pass --force"):
        prepare(corpus_file, out, min_count=1, progress=False)  # not without --force
    assert prepare(corpus_file, out, min_count=1, force=True, progress=False).meta["min_count"] == 1
    (out / "notes.txt").write_text("mine")
    (out / "meta.json").write_text("{}")
    with pytest.raises(InputError, match="holds no prepared corpus"):
        prepare(corpus_file, out, min_count=1, force=True, progress=False)
    assert (out / "notes.txt").read_text() == "mine"


def test_failed_replacement_keeps_the_old_prepared_folder(corpus_file: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    before = snapshot(out)
    with pytest.raises(InputError, match="no word occurs at least --min-count 99"):
        prepare(corpus_file, out, min_count=99, force=True, progress=False)
    assert snapshot(out) == before and leftovers(tmp_path) == []
    PreparedCorpus.open(out)


def test_crash_while_encoding_leaves_nothing(corpus_file: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(token_ids, "encode", boom)  # the two-pass path (pruning)
    monkeypatch.setattr(token_ids.Scan, "encode", boom)  # the one-pass path
    for max_distinct in (2, 10_000):
        with pytest.raises(KeyboardInterrupt):
            prepare(corpus_file, tmp_path / "out", min_count=1, max_distinct=max_distinct,
                    progress=False)
        assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("change", ["write", "remove"])
def test_a_file_changed_while_it_is_read_is_refused_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """The ids would be of the old text, and meta.json's size and time of the new one, which a
    resume compares to say whether the corpus changed."""
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "a.txt").write_text("one two three\n" * 50)
    (folder / "b.txt").write_text("four five\n" * 50)
    count = token_ids.count

    def count_then_change(*args: object, **kwargs: object) -> object:
        counted = count(*args, **kwargs)  # type: ignore[arg-type]
        if change == "write":
            (folder / "b.txt").write_text("four\n")
        else:
            (folder / "b.txt").unlink()
        return counted

    monkeypatch.setattr(token_ids, "count", count_then_change)
    with pytest.raises(InputError) as e:
        prepare(folder, tmp_path / "out", min_count=1, progress=False)
    b = folder / "b.txt"
    assert str(e.value) == (
        f"{b} changed while the corpus was being prepared (500 bytes, then 5); run 'embedlab "
        "prepare' again once nothing writes to it" if change == "write" else
        f"{b} was removed while the corpus was being prepared; run 'embedlab prepare' again "
        "once it is back")
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []
    # a train preparing its own copy: its user re-runs the train
    (folder / "b.txt").write_text("four five\n" * 50)
    with pytest.raises(InputError, match=r"; re-run the same command once"):
        prepare(folder, tmp_path / "run" / "prepared", min_count=1, progress=False,
                run_dir=tmp_path / "run")


@pytest.mark.parametrize("data,problem", [
    (b"", "holds no tokens"),
    (b" \n\t\n", "holds no tokens"),
    (b"\x00\x01\x02\x03" * 64, "looks binary"),
])
def test_bad_corpus_content(tmp_path: Path, data: bytes, problem: str) -> None:
    src = tmp_path / "c.txt"
    src.write_bytes(data)
    with pytest.raises(InputError, match=problem):
        prepare(src, tmp_path / "out", min_count=1, progress=False)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_missing_corpus(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="corpus not found"):
        prepare(tmp_path / "nope", tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_out_inside_the_corpus_folder(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("a b c\n")
    with pytest.raises(InputError, match="inside the corpus folder"):
        prepare(tmp_path, tmp_path / "out", min_count=1, progress=False)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_a_run_folder_inside_the_corpus_folder_is_named_as_such(tmp_path: Path) -> None:
    # train prepares into RUN/prepared and has no --out: the message names the run folder
    (tmp_path / "c.txt").write_text("a b c\n")
    run = tmp_path / "runs" / "r"
    with pytest.raises(InputError) as info:
        prepare(tmp_path, run / "prepared", min_count=1, progress=False, run_dir=run)
    assert str(info.value) == (f"the run folder {run} is inside the corpus folder {tmp_path}; "
                               "its files would be read as corpus text — pass --run or "
                               "--runs-dir outside it")
    assert not (tmp_path / "runs").exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("kwargs,flag", [({"min_count": 0}, "--min-count"),
                                         ({"max_vocab": 0}, "--max-vocab"),
                                         ({"unk": "a b"}, "--unk"),
                                         ({"max_distinct": 0}, "--max-distinct")])
def test_bad_options(corpus_file: Path, tmp_path: Path, kwargs: dict[str, object],
                     flag: str) -> None:
    with pytest.raises(InputError, match=flag):
        prepare(corpus_file, tmp_path / "out", progress=False, **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


# ---- special corpora ----------------------------------------------------------------------------
def test_demo_uses_the_demo_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    fake = types.ModuleType("embedlab.data.demo")

    def write_demo_corpus(path: Path, seed: int = 0) -> Path:
        Path(path).write_text("king queen man woman\n" * 10, encoding="utf-8")
        return Path(path)

    fake.write_demo_corpus = write_demo_corpus  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "embedlab.data.demo", fake)
    pc = prepare("demo", tmp_path / "out", min_count=1, progress=False)
    assert pc.meta["source"] == "demo" and pc.meta["tokens"] == 40
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "ids.u32", "meta.json", "sentences.i64", "vocab.tsv"]
    assert capsys.readouterr().err == ""
    # a folder named demo here: the name still means the built-in corpus, and one line says so
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").mkdir()
    pc = prepare("demo", tmp_path / "again", min_count=1, progress=False)
    assert pc.meta["tokens"] == 40
    assert capsys.readouterr().err == ("embedlab: note: 'demo' names the built-in demo corpus, "
                                       "not demo in this folder; pass ./demo to use that\n")


def test_text8_uses_the_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.data import download

    cached = tmp_path / "text8"
    cached.write_text(" a b a b a", encoding="utf-8")
    monkeypatch.setattr(download, "fetch_text8", lambda **kw: cached)
    pc = prepare("text8", tmp_path / "out", min_count=1, progress=False)
    assert pc.meta["source"] == "text8" and decode(pc) == [["a", "b", "a", "b", "a"]]


@pytest.mark.parametrize("where,error", [
    # numpy's tofile reports a full disk with no errno and no file name
    ("ids", OSError("90909 requested and 0 written")),
    ("vocab", OSError(errno.ENOSPC, "No space left on device")),
    ("meta", OSError(errno.EDQUOT, "Disk quota exceeded")),
])
def test_full_disk_is_one_line_and_leaves_nothing(corpus_file: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, where: str,
                                                  error: OSError) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise error

    target = {"ids": (np.ndarray, "tofile"), "vocab": (Vocab, "save_tsv"),
              "meta": (preparing, "write_meta")}[where]
    out = tmp_path / "data" / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    before = snapshot(out)
    if where == "ids":  # np.ndarray's methods cannot be patched: patch the module's writer
        monkeypatch.setattr(token_ids, "_write_array", fail)
    else:
        monkeypatch.setattr(*target, fail)
    for dest, force in ((out, True), (tmp_path / "new" / "out", False)):
        with pytest.raises(InputError, match=r"cannot write the prepared corpus .*out \(.*\); "
                                             r"free (disk space|space within your disk quota,) "
                                             r"or pass --out on another disk") as info:
            prepare(corpus_file, dest, min_count=1, force=force, progress=False)
        assert "\n" not in str(info.value)
    assert snapshot(out) == before and leftovers(out.parent) == []
    assert not (tmp_path / "new").exists()


def test_a_full_disk_while_train_prepares_names_the_run_not_out(
        corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """train prepares into RUN/prepared and has no --out: the fix names --run."""
    from embedlab.cli import main

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Vocab, "save_tsv", fail)
    with pytest.raises(SystemExit):
        main(["train", "--corpus", str(corpus_file), "--run", str(tmp_path / "run"),
              "--threads", "1", "--no-tensorboard", "--min-count", "1"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "free disk space or pass --run on another disk" in err
    assert not (tmp_path / "run").exists()


def test_unwritable_out_is_one_line(corpus_file: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "x")

    monkeypatch.setattr(Vocab, "save_tsv", fail)
    with pytest.raises(InputError, match=r"\(Permission denied\); pass --out in a writable "
                                         "folder"):
        prepare(corpus_file, tmp_path / "out", min_count=1, progress=False)
    assert leftovers(tmp_path) == [] and not (tmp_path / "out").exists()


_SIGTERM_CHILD = """
import os, shutil, signal, sys
from embedlab.data.preparing import prepare_into
from embedlab.data.vocab import Vocab
corpus, out, where = sys.argv[1:]

def stop_here(real, only=""):
    def hook(*args, **kwargs):
        if only in str(args[0]):
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)
    return hook

if where == "encoding":  # the new folder is half-written
    Vocab.save_tsv = stop_here(Vocab.save_tsv)
elif where == "commit":  # the old folder has been moved aside, the new one not yet in place
    os.replace = stop_here(os.replace)
else:  # removing the old folder after the new one is in place
    shutil.rmtree = stop_here(shutil.rmtree, only=".old-")
prepare_into(corpus, out, min_count=1, force=True, progress=False)
"""


@pytest.mark.parametrize("where", ["encoding", "commit", "removing"])
def test_sigterm_during_prepare_force_leaves_no_hidden_folders(corpus_file: Path, tmp_path: Path,
                                                               where: str) -> None:
    # SIGTERM's default action would end the process at once, leaving '.out.tmp-*' and
    # '.out.old-*' folders as big as a prepared corpus; it cleans up like Ctrl-C does
    out = tmp_path / "out"
    prepare(corpus_file, out, min_count=2, progress=False)
    before = snapshot(out)
    proc = subprocess.run([sys.executable, "-c", _SIGTERM_CHILD, str(corpus_file), str(out),
                           where], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert "Traceback" not in proc.stderr
    # said, as Ctrl-C's "interrupted" is: a log shows why the command ended
    assert proc.stderr.endswith("embedlab: terminated (SIGTERM); the partial output is removed\n")
    assert leftovers(tmp_path) == []
    PreparedCorpus.open(out)  # the old folder or the new one, whole
    if where != "removing":
        assert snapshot(out) == before


def test_hidden_folders_of_dead_processes_are_swept(corpus_file: Path, tmp_path: Path) -> None:
    # left by a prepare killed with SIGKILL (or by an older embedlab killed with SIGTERM)
    dead, alive = 2**22 + 12345, os.getpid()  # above Linux's largest pid: never running
    for name in (f".out.tmp-{dead}-0a1b2c", f".out.old-{dead}-17000", f".out.tmp-{alive}-abcd",
                 f".other.tmp-{dead}-ab", ".out.tmp-0a1b2c3d4e5f"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "ids.u32").write_bytes(b"\0" * 8)
    prepare(corpus_file, tmp_path / "out", min_count=1, progress=False)
    # a live process's folder, another --out's, and an unnamed owner's are left alone
    assert leftovers(tmp_path) == sorted([f".out.tmp-{alive}-abcd", f".other.tmp-{dead}-ab",
                                          ".out.tmp-0a1b2c3d4e5f"])


def test_min_count_unmet_after_pruning_says_to_raise_max_distinct(tmp_path: Path) -> None:
    # 'a' occurs 3 times, but pruning at --max-distinct 1 leaves it a count of 1: the message
    # blames pruning, not --min-count, also where pruning leaves no word at all
    src = tmp_path / "c.txt"
    for text in ("a\nb\na\nc\na\n", "a\nb\n"):
        src.write_text(text, encoding="utf-8")
        with pytest.raises(InputError) as info:
            prepare(src, tmp_path / "out", min_count=2, max_distinct=1, progress=False)
        message = str(info.value)
        assert message.startswith("no word occurs at least --min-count 2 times in the counts "
                                  "left after pruning to --max-distinct 1 (")
        assert "lower bounds" in message
        assert message.endswith("; raise --max-distinct, e.g. --max-distinct 10000000")
        assert "\n" not in message and leftovers(tmp_path) == []
