"""The run's corpus: a corpus too small to train is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedlab.errors import InputError

from .small_runs import make_cfg, run_train, write_corpus


def test_too_few_tokens_is_an_input_error(tmp_path: Path) -> None:
    corpus = tmp_path / "one.txt"
    corpus.write_text("hello\n")
    with pytest.raises(InputError, match="fewer than a window needs"):
        run_train(make_cfg(corpus, data={"min_count": 1}), tmp_path / "r")


@pytest.mark.parametrize("engine", ["native", "torch"])
def test_an_id_that_names_no_word_is_refused_by_whoever_reads_it(
        tmp_path: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a new run on the native engine leaves the check of every id to its batch generator (no
    # read of the whole corpus before the first step); the others check at the open
    import numpy as np

    from embedlab.data import prepared as prepared_module
    from embedlab.data.preparing import prepare
    from embedlab.engines import native

    if engine == "native" and native.unavailable_reason() is not None:
        pytest.skip("the native kernel does not build here")
    if engine == "torch":
        pytest.importorskip("torch")
    folder = tmp_path / "prep"
    prepare(write_corpus(tmp_path / "c.txt"), folder, min_count=1, progress=False)
    ids = np.fromfile(folder / "ids.u32", dtype="<u4")
    at = len(ids) - 3
    ids[at] = 10**9
    ids.tofile(folder / "ids.u32")
    scans: list[Path] = []
    scan = prepared_module._ids_name_words
    monkeypatch.setattr(prepared_module, "_ids_name_words",
                        lambda root, *a: scans.append(root) or scan(root, *a))
    with pytest.raises(InputError, match=f"ids.u32 holds id 1,000,000,000 at position {at:,}"):
        run_train(make_cfg(folder, engine=engine, data={"min_count": 1}), tmp_path / "r")
    assert scans == ([] if engine == "native" else [folder])


def test_a_linked_prepared_copy_of_other_flags_is_not_deleted(tmp_path: Path) -> None:
    # RUN/prepared linked to a corpus prepared with other flags: rebuilding it called
    # shutil.rmtree on the link, a traceback (and, through a resolved path, another folder)
    from embedlab.data.preparing import prepare

    corpus = write_corpus(tmp_path / "c.txt")
    other = tmp_path / "other"
    prepare(corpus, other, min_count=1, progress=False)
    run = tmp_path / "run"
    run.mkdir()
    (run / "prepared").symlink_to(other)
    with pytest.raises(InputError, match=r"prepared is a symbolic link to another prepared "
                                         r"corpus \(made with other data flags\)"):
        run_train(make_cfg(corpus, data={"min_count": 3}, max_steps=1), run)
    assert (other / "meta.json").is_file()
