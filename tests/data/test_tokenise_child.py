"""The corpus-tokenising child process: same bytes as in-process, same errors, no litter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from embedlab.config import DataConfig
from embedlab.data import tokenise_child
from embedlab.data.preparing import prepare
from embedlab.data.tokenise_child import PrepareAhead, should_prepare_ahead
from embedlab.errors import InputError
from embedlab.testing import write_zipf_corpus


def private_folders(parent: Path) -> list[Path]:
    return sorted(parent.glob(".*.prepare-*"))


def files_of(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "meta.json":  # the creation time differs, nothing else may
                meta = json.loads(data)
                meta.pop("created")
                data = json.dumps(meta, sort_keys=True).encode()
            out[str(p.relative_to(root))] = data
    return out


def _child_folder(tmp_path: Path, corpus: Path, *, parent_pid: int) -> Path:
    """A child's private folder with the spec PrepareAhead.start would write."""
    folder = tmp_path / ".r.prepare-1-x"
    folder.mkdir()
    (folder / tokenise_child.SPEC_FILE).write_text(json.dumps({
        "data": {"corpus": str(corpus), "lowercase": False, "min_count": 1, "max_vocab": None,
                 "unk": None, "max_distinct": 10_000_000},
        "out": str(folder / tokenise_child.OUT_DIR), "progress": False, "parent_pid": parent_pid}))
    return folder


def test_the_child_writes_exactly_what_prepare_writes_in_process(tmp_path: Path) -> None:
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=300)
    data = DataConfig(corpus=str(corpus), min_count=2, unk="<unk>")
    run = tmp_path / "runs" / "r1"
    job = PrepareAhead.start(data, run, progress=False)
    assert job is not None
    run.mkdir(parents=True)
    assert job.take(run / "prepared")
    prepare(corpus, tmp_path / "inproc", min_count=2, unk="<unk>", progress=False)
    assert files_of(run / "prepared") == files_of(tmp_path / "inproc")
    assert private_folders(run.parent) == []


def test_a_bad_corpus_gives_the_in_process_error(tmp_path: Path) -> None:
    corpus = tmp_path / "garbage.bin"
    corpus.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(InputError) as in_process:
        prepare(corpus, tmp_path / "inproc", progress=False)
    run = tmp_path / "r"
    job = PrepareAhead.start(DataConfig(corpus=str(corpus)), run, progress=False)
    assert job is not None
    with pytest.raises(InputError) as from_child:
        job.take(run / "prepared")
    assert str(from_child.value) == str(in_process.value)
    assert not (run / "prepared").exists()
    assert private_folders(tmp_path) == []


def test_the_childs_error_names_the_runs_folder_not_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk met by the child is told with RUN/prepared, as preparing in this process
    tells it, not with the child's private folder, which is gone by then."""
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=50)
    run = tmp_path / "r"
    job = PrepareAhead.start(DataConfig(corpus=str(corpus)), run, progress=False)
    assert job is not None
    private = job.folder / tokenise_child.OUT_DIR
    monkeypatch.setattr(tokenise_child, "_read_result", lambda path: {
        "error": f"cannot write the prepared corpus {private} (No space left on device); free "
                 "disk space"})
    with pytest.raises(InputError) as failed:
        job.take(run / "prepared")
    assert str(failed.value) == (f"cannot write the prepared corpus {run / 'prepared'} (No space "
                                 "left on device); free disk space")
    assert private_folders(tmp_path) == []


def test_the_childs_warnings_reach_this_stderr(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(write_zipf_corpus(tmp_path / "z.txt").read_bytes() + b" bad\xff word\n")
    run = tmp_path / "r"
    run.mkdir()
    job = PrepareAhead.start(DataConfig(corpus=str(corpus)), run, progress=False)
    assert job is not None and job.take(run / "prepared")
    err = capsys.readouterr().err
    assert "replaced 1 invalid UTF-8 sequences" in err
    assert err.count("\n") == 1
    # to a Python caller, as any warning of a preparation in this process: an EmbedlabWarning
    from embedlab.errors import EmbedlabWarning, messages_for

    job = PrepareAhead.start(DataConfig(corpus=str(corpus)), run, progress=False)
    with messages_for("python"), pytest.warns(EmbedlabWarning, match="replaced 1 invalid"):
        assert job is not None and job.take(run / "again")
    assert capsys.readouterr().err == ""


def test_cancel_stops_the_child_and_removes_its_folder(tmp_path: Path) -> None:
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=20_000)
    job = PrepareAhead.start(DataConfig(corpus=str(corpus)), tmp_path / "r", progress=False)
    assert job is not None
    job.cancel()
    assert job._proc.returncode is not None
    assert private_folders(tmp_path) == []
    job.cancel()  # idempotent


def test_a_child_that_crashes_is_ignored(tmp_path: Path) -> None:
    folder = tmp_path / ".r.prepare-1-x"
    folder.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(1)"])
    job = PrepareAhead(DataConfig(corpus="whatever"), folder, proc, relay_stderr=True)
    assert job.take(tmp_path / "prepared") is False  # the caller prepares in-process
    assert not folder.exists()


def test_a_child_failing_for_another_reason_says_it_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Not the corpus's fault (a bug, a full disk...): no traceback from the child, which the
    # parent would replay before its own in-process attempt reports the failure again.
    corpus = write_zipf_corpus(tmp_path / "c.txt")
    folder = _child_folder(tmp_path, corpus, parent_pid=os.getppid())
    monkeypatch.setattr(tokenise_child.signal, "signal", lambda *a: None)  # keep pytest's Ctrl-C

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    import embedlab.data.preparing

    monkeypatch.setattr(embedlab.data.preparing, "prepare_into", broken)
    assert tokenise_child._child(folder) == 1
    assert json.loads((folder / tokenise_child.RESULT_FILE).read_text()) == {
        "failed": "RuntimeError: disk on fire"}
    assert capsys.readouterr() == ("", "")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(1)"])
    job = PrepareAhead(DataConfig(corpus=str(corpus)), folder, proc, relay_stderr=True)
    assert job.take(tmp_path / "prepared") is False  # the caller prepares in-process


def test_an_existing_destination_is_left_alone(tmp_path: Path) -> None:
    corpus = write_zipf_corpus(tmp_path / "c.txt")
    dest = tmp_path / "r" / "prepared"
    dest.mkdir(parents=True)
    (dest / "mine").write_text("keep")
    job = PrepareAhead.start(DataConfig(corpus=str(corpus)), tmp_path / "r", progress=False)
    assert job is not None
    assert job.take(dest) is False
    assert [p.name for p in dest.iterdir()] == ["mine"]
    assert private_folders(tmp_path) == []


def test_an_orphaned_child_removes_its_folder(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = write_zipf_corpus(tmp_path / "c.txt")
    # not our parent: the "parent" has died
    folder = _child_folder(tmp_path, corpus, parent_pid=os.getppid() + 1_000_000)
    monkeypatch.setattr(tokenise_child.signal, "signal", lambda *a: None)  # keep pytest's Ctrl-C
    assert tokenise_child._child(folder) == 1
    assert not folder.exists()


def test_folders_of_dead_parents_are_swept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f".r.prepare-{dead}-abcd"
    live = tmp_path / f".r.prepare-{os.getpid()}-abcd"
    other_run = tmp_path / f".r2.prepare-{dead}-abcd"
    for p in (stale, live, other_run):
        p.mkdir()
    tokenise_child._sweep_orphans(tmp_path, "r")
    assert not stale.exists() and live.exists() and other_run.exists()


def test_when_a_child_is_worth_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = write_zipf_corpus(tmp_path / "big.txt", lines=50)
    prepared = tmp_path / "prep"
    prepare(big, prepared, min_count=1, progress=False)
    size = big.stat().st_size

    def worth(corpus: str | Path, min_bytes: int = size, engine: str = "torch") -> bool:
        return should_prepare_ahead(DataConfig(corpus=str(corpus)), engine=engine,
                                    min_bytes=min_bytes)

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert worth(big)
    assert worth(big, engine="cuda")  # imports torch too
    assert not worth(big, engine="native")  # imports no torch: nothing worth overlapping
    assert not worth(big, size + 1)  # too small to pay for a child
    assert worth("text8")
    assert not worth("demo")
    assert not worth(prepared)
    assert not worth(tmp_path / "missing.txt")  # the in-process code reports it
    monkeypatch.setitem(sys.modules, "torch", object())
    assert not worth(big)  # torch already imported: nothing to overlap
