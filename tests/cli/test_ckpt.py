"""``embedlab ckpt``: listing with roles/verification, tensors, subset export, errors."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from embedlab.checkpoint import CheckpointManager, find_checkpoint, load_checkpoint
from embedlab.cli import cli, main
from embedlab.testing import run_cli


@pytest.fixture
def run(tmp_path: Path) -> Path:
    m = CheckpointManager(tmp_path / "run", keep=2, keep_every=2)
    for step, loss in ((1, 0.1), (2, 0.9), (3, 0.8), (5, 0.7)):
        m.save(step, {"input_embeddings": torch.full((4, 3), float(step)),
                      "output_embeddings": torch.zeros(4, 3)}, {"epoch": 0}, {"loss": loss})
    return tmp_path / "run"


def _invoke(*args: str) -> str:
    res = CliRunner().invoke(cli, ["ckpt", *args], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    return res.output


def test_the_listing_as_json(run: Path) -> None:
    import json

    data = run / "checkpoints" / "ckpt-00000003" / "tensors.safetensors"
    data.write_bytes(data.read_bytes()[:-4])
    listed = json.loads(_invoke(str(run), "--json"))
    assert [c["step"] for c in listed] == [1, 2, 3, 5]
    by_step = {c["step"]: c for c in listed}
    assert by_step[5]["roles"] == ["latest", "kept"] and by_step[5]["verified"] is True
    assert by_step[5]["path"] == str(run / "checkpoints" / "ckpt-00000005")
    assert by_step[3]["verified"] is False and "truncated" in by_step[3]["problem"]
    assert isinstance(by_step[1]["time"], float) and by_step[1]["size"] > 0
    tensors = json.loads(_invoke(str(run), "--tensors", "--step", "5", "--json"))
    assert tensors == {"checkpoint": str(run / "checkpoints" / "ckpt-00000005"), "tensors": [
        {"name": "input_embeddings", "shape": [4, 3], "dtype": "F32"},
        {"name": "output_embeddings", "shape": [4, 3], "dtype": "F32"}]}


def test_list_shows_roles_and_verification(run: Path) -> None:
    data = (run / "checkpoints" / "ckpt-00000003" / "tensors.safetensors")
    data.write_bytes(data.read_bytes()[:-4])
    lines = {int(line.split("│")[1]): line for line in _invoke(str(run)).splitlines()
             if line.startswith("│")}
    assert set(lines) == {1, 2, 3, 5}
    assert "best" in lines[1] and "archive" in lines[2] and "latest,kept" in lines[5]
    assert "yes" in lines[5] and "NO:" in lines[3] and "truncated" in lines[3]
    # the time with its offset from UTC, as env.json's: a reader elsewhere knows the hour
    assert re.search(r"│ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4} +│", lines[5])


def test_a_deleted_checkpoint_the_index_lists_is_shown_and_warned_about(
        run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Vectors of an older step must not go out unnoticed: the listing shows the checkpoint the
    index names and the folder lacks, readers say which they read instead, and --verify fails
    for a script (a listing without it keeps status 0)."""
    _vocab(run)
    shutil.rmtree(run / "checkpoints" / "ckpt-00000005")
    rows = {line.split("│")[1].strip(): line for line in _invoke(str(run)).splitlines()
            if line.startswith("│")}
    assert list(rows) == ["1", "2", "3", "5"]
    assert "latest" in rows["5"] and "NO: missing (the index lists it; its folder is gone)" in \
        rows["5"]
    code, _, err = run_cli(["ckpt", str(run), "--verify"], capsys)
    assert (code, err) == (1, f"embedlab: 1 of 4 checkpoint(s) of {run} failed the check (see "
                              "the table); restore them from a backup or a new copy of the run\n")
    code, _, err = run_cli(["ckpt", str(run), "--verify", "--tensors"], capsys)
    assert code == 2 and err.startswith("embedlab: error: --verify checks the listing of every "
                                        "checkpoint; drop it, or drop --tensors")
    code, _, err = run_cli(["export", str(run), "--out", str(tmp_path / "v.txt")], capsys)
    assert (code, err) == (0, f"embedlab: warning: the index of {run} lists ckpt-00000005, "
                              f"which is not in {run / 'checkpoints'} (deleted?): reading "
                              "ckpt-00000003, the newest checkpoint there\n")


def test_verify_passes_an_intact_run_and_fails_a_damaged_one(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["ckpt", str(run), "--verify"], capsys)[0] == 0
    data = run / "checkpoints" / "ckpt-00000002" / "tensors.safetensors"
    data.write_bytes(data.read_bytes()[:-4])
    assert run_cli(["ckpt", str(run)], capsys)[0] == 0
    code, out, _ = run_cli(["ckpt", str(run), "--verify"], capsys)
    assert code == 1 and "NO:" in out


def test_tensors_of_latest_step_and_best(run: Path) -> None:
    out = _invoke(str(run), "--tensors")
    assert "ckpt-00000005" in out and "input_embeddings" in out and "4 × 3" in out
    assert "ckpt-00000001" in _invoke(str(run), "--best")
    assert "ckpt-00000002" in _invoke(str(run), "--tensors", "--step", "2")


def test_export_subset_with_rename(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "emb"
    _invoke(str(run), "--step", "2", "--export-subset", str(out), "--names",
            "input_embeddings", "--map", "embed_matrix=input_embeddings")
    tensors, state = load_checkpoint(find_checkpoint(out))
    assert list(tensors) == ["embed_matrix"] and np.array_equal(tensors["embed_matrix"],
                                                               np.full((4, 3), 2.0, np.float32))
    assert state["step"] == 2 and state["exported_from"].endswith("ckpt-00000002")


def test_export_subset_keeps_bfloat16(tmp_path: Path) -> None:
    # NumPy has no bfloat16: a NumPy load widens it to float32, which would double the subset
    src = tmp_path / "bf16"
    w = torch.arange(12, dtype=torch.float32).reshape(4, 3).to(torch.bfloat16)
    CheckpointManager(src).save(4, {"input_embeddings": w, "output_embeddings": w.clone()}, {})
    out = tmp_path / "emb"
    _invoke(str(src), "--export-subset", str(out), "--names", "input_embeddings")
    tensors, _ = load_checkpoint(find_checkpoint(out), framework="pt")
    assert tensors["input_embeddings"].dtype == torch.bfloat16
    assert torch.equal(tensors["input_embeddings"], w)
    assert "BF16" in _invoke(str(out), "--tensors")


# each message names the problem and the fix
@pytest.mark.parametrize(("args", "message"), [
    (["{missing}"], "missing does not exist; pass a run folder (see 'embedlab runs')"),
    (["{empty}"], "empty has no checkpoints yet; train it first (embedlab train --run "),
    (["{run}", "--step", "4"], "no checkpoint at step 4 (available: 1, 2, 3, 5); pass one of "
                               "them to --step\n"),
    (["{run}", "--step", "2", "--best"], "--step and --best are mutually exclusive; pass one"),
    (["{run}", "--export-subset", "{tmp}/x", "--names", "nce_w"],
     "no tensor named nce_w; it has: input_embeddings, output_embeddings"),
    (["{run}", "--export-subset", "{tmp}/x", "--map", "oops"],
     "--map expects NEW=STORED, got 'oops'; e.g. --map embed_matrix=input_embeddings"),
])
def test_errors_are_one_line_exit_2(run: Path, tmp_path: Path, args: list[str], message: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    fmt = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "run": run,
           "tmp": tmp_path}
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    with pytest.raises(SystemExit) as e:
        main(["ckpt", *(a.format(**fmt) for a in args)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and message in err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before
    assert not (tmp_path / "x").exists()


def _vocab(run: Path) -> None:
    (run / "vocab.tsv").write_text("the\t9\nking\t5\nqueen\t4\nman\t3\n")


def test_export_subset_is_a_queryable_run(run: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.vectors import load

    _vocab(run)
    out = tmp_path / "emb"
    # the help's own example: the input embeddings under the lecture's name
    _invoke(str(run), "--step", "2", "--export-subset", str(out), "--names",
            "input_embeddings", "--map", "embed_matrix=input_embeddings")
    assert (out / "vocab.tsv").read_bytes() == (run / "vocab.tsv").read_bytes()
    vec = load(out)
    assert vec.words == ("the", "king", "queen", "man")
    assert (vec.matrix == 2.0).all()
    again = tmp_path / "again"  # a subset of the subset still knows what embed_matrix is
    _invoke(str(out), "--export-subset", str(again), "--map", "w=embed_matrix")
    assert (load(again).matrix == 2.0).all()
    for argv in (["neighbors", str(out), "king", "-k", "2"],
                 ["analogy", str(out), "the", "king", "queen", "-k", "1"],
                 ["export", str(out)]):
        capsys.readouterr()
        code, _, err = run_cli(argv, capsys)
        assert code == 0, err
    assert (out / "exports" / "vectors.txt").is_file()


def test_a_subset_without_the_input_embeddings_says_how_to_read_another_tensor(
        run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The output (context) vectors are read as vectors through a subset that names them so:
    the refusal of a subset without input embeddings gives that command, and it works."""
    from embedlab.vectors import load

    _vocab(run)
    out, fixed = tmp_path / "ctx", tmp_path / "ctx-as-vectors"
    _invoke(str(run), "--export-subset", str(out), "--names", "output_embeddings")
    code, _, err = run_cli(["export", str(out), "--out", str(tmp_path / "x.txt")], capsys)
    ckpt = find_checkpoint(out)
    command = (f"embedlab ckpt {out} --export-subset OUT --names output_embeddings --map "
               "input_embeddings=output_embeddings")
    assert (code, err) == (2, f"embedlab: error: checkpoint {ckpt} holds no input embeddings, "
                              "which are the word vectors; it has: output_embeddings. To read "
                              "output_embeddings as the vectors, write a subset that names it "
                              f"so: {command}\n")
    _invoke(*command.replace("OUT", str(fixed)).split()[2:])
    assert (load(fixed).matrix == 0.0).all()


@pytest.fixture
def hs_run(tmp_path: Path) -> Path:
    """A hierarchical-softmax run's layout: 4 words, 3 inner nodes of the Huffman tree."""
    m = CheckpointManager(tmp_path / "hs", keep=2)
    m.save(1, {"input_embeddings": torch.ones(4, 3), "hs_nodes": torch.zeros(3, 3)},
           {"epoch": 0}, {"loss": 0.5})
    _vocab(tmp_path / "hs")
    return tmp_path / "hs"


def test_tensors_without_a_row_per_word_are_not_mapped_to_the_word_vectors(
        hs_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the subset was written, then every reader refused it blaming an edited vocab.tsv
    code, _, err = run_cli(["ckpt", str(hs_run), "--export-subset", str(tmp_path / "s"),
                            "--names", "hs_nodes", "--map", "input_embeddings=hs_nodes"], capsys)
    assert (code, err) == (2, "embedlab: error: --map input_embeddings=hs_nodes: hs_nodes has "
                              "shape (3, 3) for 4 words (the inner nodes of the Huffman tree, "
                              "one fewer than the words), and the readers take input_embeddings "
                              "as the word vectors, a row per word; export hs_nodes under its "
                              "own name (drop the --map)\n")  # it has no output_embeddings
    assert not (tmp_path / "s").exists()
    # a subset of hs_nodes alone: its readers no longer suggest that --map
    _invoke(str(hs_run), "--export-subset", str(tmp_path / "nodes"), "--names", "hs_nodes")
    code, _, err = run_cli(["neighbors", str(tmp_path / "nodes"), "king"], capsys)
    assert (code, err) == (2, f"embedlab: error: checkpoint {find_checkpoint(tmp_path / 'nodes')}"
                              " holds no word vectors (it has: hs_nodes, none of them a vector "
                              "per word); export the input_embeddings of the run it came from\n")


@pytest.mark.parametrize("taken", ["file", "vocab", "unwritable"])
def test_export_subset_refuses_and_damages_nothing(run: Path, tmp_path: Path, taken: str,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _vocab(run)
    out = tmp_path / "emb"
    message = "is a folder holding other files (vocab.tsv); pick a new or empty folder"
    if taken == "file":
        out.write_text("precious")
        message = "is a file, not a folder; pick a new folder"
    elif taken == "vocab":
        out.mkdir()
        (out / "vocab.tsv").write_text("precious")
    else:
        def denied(*args: object, **kwargs: object) -> tuple[int, str]:
            raise PermissionError(13, "Permission denied")  # mkstemp in a read-only folder

        monkeypatch.setattr("embedlab.fsutil.tempfile.mkstemp", denied)
        message = "pass --export-subset in a writable folder"
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--export-subset", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and message in err
    if taken == "file":
        assert out.read_text() == "precious"
    elif taken == "vocab":
        assert sorted(p.name for p in out.iterdir()) == ["vocab.tsv"]
        assert (out / "vocab.tsv").read_text() == "precious"
    else:
        assert not (out / "checkpoints").exists() and not (out / "vocab.tsv").exists()


def test_export_subset_without_vocab_says_so(run: Path, tmp_path: Path) -> None:
    out = _invoke(str(run), "--export-subset", str(tmp_path / "emb"))
    assert "holds tensors only" in out and "vocab.tsv" in out


def _export_fails_with(error: OSError, run: Path, out: Path, monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str]) -> str:
    """stderr of ``ckpt RUN --export-subset OUT`` when writing the checkpoint raises ``error``
    (after checking the exit status is 2)."""
    from embedlab.checkpoint import manager as ck

    def fail(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(ck, "_write_contents", fail)
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--export-subset", str(out)])
    assert e.value.code == 2
    return capsys.readouterr().err


def test_a_failed_export_subset_can_be_retried(run: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # A save that fails (a full disk) left OUT/checkpoints/ behind, so the retry was refused
    # with "already holds checkpoints".
    _vocab(run)
    out = tmp_path / "new" / "emb"
    # an export's wording, not training's "re-run the same command to resume from the last
    # saved checkpoint (earlier checkpoints are intact)"
    assert _export_fails_with(OSError(28, "No space left on device"), run, out, monkeypatch,
                              capsys) == (
        f"embedlab: error: cannot write the subset to {out} (No space left on device); free disk "
        "space or pass --export-subset on another disk, then re-run the export "
        f"({out} is left as it was)\n")
    assert not (tmp_path / "new").exists()  # nor the parent it had to make
    monkeypatch.undo()
    main(["ckpt", str(run), "--export-subset", str(out)])
    assert (out / "vocab.tsv").is_file() and find_checkpoint(out)


def test_export_subset_save_denied_into_an_existing_folder(run: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / ".hidden").write_text("precious")  # hidden entries do not make it someone's folder
    assert _export_fails_with(PermissionError(13, "Permission denied"), run, out, monkeypatch,
                              capsys) == (
        f"embedlab: error: cannot write the subset to {out} (Permission denied); pass "
        f"--export-subset in a writable folder ({out} is left as it was)\n")
    assert sorted(p.name for p in out.iterdir()) == [".hidden"]
    assert (out / ".hidden").read_text() == "precious"


@pytest.mark.parametrize("place", ["notes", "runs"])
def test_export_subset_refuses_a_folder_of_other_files(run: Path, tmp_path: Path, place: str,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    # written there, the subset would make a folder of notes (or a folder of runs) one run
    _vocab(run)
    out = tmp_path / "mine"
    if place == "notes":
        out.mkdir()
        (out / "notes.txt").write_text("precious")
    else:
        out = run.parent
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--export-subset", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert f"--export-subset {out} is a folder holding other files" in err
    assert "pick a new or empty folder, e.g. --export-subset" in err
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.parametrize("args", [["--names", "input_embeddings"], ["--map", "a=input_embeddings"],
                                  ["--tensors", "--export-subset", "OUT"]])
def test_subset_options_alone_are_refused(run: Path, tmp_path: Path, args: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # ignored, they printed the listing as if the subset had been asked for and written
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), *args])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert ("run ckpt once for each" if "--tensors" in args else
            f"{args[0]} applies only with --export-subset") in err
    assert not (tmp_path / "out").exists()


def test_list_survives_a_bad_created_time(run: Path) -> None:
    # "created" is not hashed; 1e20 / NaN / [1] crashed the listing (OverflowError, ...)
    import json

    manifest_path = run / "checkpoints" / "ckpt-00000005" / "MANIFEST.json"
    for created in (1e20, float("nan"), [1]):
        manifest = json.loads(manifest_path.read_text())
        manifest["created"] = created
        manifest_path.write_text(json.dumps(manifest))
        line = next(line for line in _invoke(str(run)).splitlines()
                    if line.startswith("│") and line.split("│")[1].strip() == "5")
        assert "yes" in line and "-" in line.split("│")[2]  # the folder's time, verified


def test_tensors_of_an_unparsable_resigned_file_is_one_line(run: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    import hashlib
    import json

    path = run / "checkpoints" / "ckpt-00000005"
    (path / "tensors.safetensors").write_bytes(b"\xff" * 300)
    manifest = json.loads((path / "MANIFEST.json").read_text())
    manifest["files"]["tensors.safetensors"] = {"sha256": hashlib.sha256(b"\xff" * 300).hexdigest(),
                                                "size": 300}
    (path / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--tensors"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"embedlab: error: cannot read checkpoint {path} (")
    assert err.endswith(f"use another checkpoint ('embedlab ckpt {run}' lists them)\n")


@pytest.mark.parametrize(("out", "message"), [
    ("{run}/checkpoints/ckpt-00000005", "is inside {real}/checkpoints/ckpt-00000005, where only "
                                        "the run's own checkpoints belong (its retention would "
                                        "delete the subset); pick a folder outside it, e.g. "
                                        "--export-subset {real}-subset"),
    ("{run}/checkpoints", "is inside {real}/checkpoints, where only"),
    ("{run}/checkpoints/new/deeper", "is inside {real}/checkpoints, where only"),
    ("{other}/checkpoints/x", "is inside {other_real}/checkpoints, where only"),
    ("{run}", "is inside the source run {real}; pick a folder outside it (e.g. "
              "--export-subset {real}-subset) or under its exports/"),
    ("{run}/sub", "is inside the source run {real}; pick a folder outside it"),
])
def test_export_subset_refuses_the_run_folders(run: Path, tmp_path: Path, out: str, message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # a subset inside a committed checkpoint (or checkpoints/) was accepted, and the run's
    # retention later deleted it along with the checkpoint
    other = tmp_path / "other"
    CheckpointManager(other).save(1, {"w": torch.zeros(1)}, {})
    fmt = {"run": run, "real": run.resolve(), "other": other, "other_real": other.resolve()}
    before = sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--export-subset", out.format(**fmt)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and message.format(**fmt) in err, err
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == before
    assert sorted(p.name for p in (other / "checkpoints").iterdir()) == ["ckpt-00000001"]


def test_export_subset_under_the_runs_exports_and_of_a_lone_checkpoint(run: Path,
                                                                       tmp_path: Path) -> None:
    _invoke(str(run), "--export-subset", str(run / "exports" / "emb"), "--names",
            "input_embeddings")
    assert find_checkpoint(run / "exports" / "emb").name == "ckpt-00000005"
    # a checkpoint folder passed on its own: its parent is not taken for a run
    _invoke(str(run / "checkpoints" / "ckpt-00000003"), "--export-subset",
            str(run / "exports" / "emb3"))
    assert find_checkpoint(run / "exports" / "emb3").name == "ckpt-00000003"


@pytest.mark.parametrize("names", [",,,", "", " ", "input_embeddings,", "input_embeddings,,x"])
def test_export_subset_refuses_empty_names(run: Path, tmp_path: Path, names: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # ",,," exported a checkpoint with no tensors, rc 0
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--export-subset", str(tmp_path / "x"), "--names", names])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert f"--names expects comma-separated tensor names, got {names!r} (an empty name); " \
           "e.g. --names input_embeddings,output_embeddings, or leave --names out" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("gone", ["emptied", "deleted"])
def test_a_run_whose_checkpoints_are_gone_is_told_so_by_every_command(
        run: Path, capsys: pytest.CaptureFixture[str], gone: str) -> None:
    """checkpoints/ emptied (or deleted) while the index still lists them: not "train it first"
    (train refuses that run), "corrupted" (nothing is there) nor "no checkpoints/ folder", the
    same line from ckpt, export and neighbors."""
    for folder in (run / "checkpoints").iterdir():
        shutil.rmtree(folder)
    if gone == "deleted":
        (run / "checkpoints").rmdir()
    for command in (["ckpt", str(run)], ["export", str(run), "--out", str(run.parent / "v.txt")],
                    ["neighbors", str(run), "the"]):
        with pytest.raises(SystemExit) as e:
            main(command)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1, err
        assert f"{run} has no checkpoints, but its index ({run / 'checkpoint'}) lists " in err
        assert "the checkpoints/ folder was emptied or moved; restore it" in err


def test_a_folder_of_runs_is_named_as_such(run: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A folder of runs is named as one, with its runs: not a run to 'train first', which train
    would refuse."""
    runs = tmp_path / "runs"
    shutil.copytree(run, runs / "a")
    (runs / "a" / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(runs)])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err == (f"embedlab: error: {runs} is not a run folder but holds runs (a); pass one "
                   "of them\n")


def test_a_checkpoint_folder_or_a_folder_of_other_files_is_named_as_such(
        run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # both were told "has no checkpoints yet; train it first (embedlab train --run ...)", which
    # train then refused for a folder of other files
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "config.json").write_text('{"a": 1}')
    ckpt = run / "checkpoints" / "ckpt-00000005"
    for folder, message in ((ckpt, f"{ckpt} is a checkpoint folder, not a run; pass its run "
                                   f"folder {run}"),
                            (notes, f"{notes} is not an embedlab run (it has no checkpoints/ "
                                    "folder and no config.json of embedlab's); pass a run "
                                    "folder (see 'embedlab runs')")):
        with pytest.raises(SystemExit) as e:
            main(["ckpt", str(folder)])
        assert e.value.code == 2 and capsys.readouterr().err == f"embedlab: error: {message}\n"
    (tmp_path / "other").mkdir()  # a folder of runs: the one that is a run is named
    with pytest.raises(SystemExit):
        main(["neighbors", str(tmp_path), "a"])
    assert capsys.readouterr().err == (f"embedlab: error: {tmp_path} is not a run folder but "
                                       "holds runs (run); pass one of them\n")


def test_one_new_name_mapped_twice_is_refused(run: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # the last mapping won: "a" held the output embeddings, the input ones kept their name
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--export-subset", str(tmp_path / "s"), "--map",
              "a=input_embeddings", "--map", "a=output_embeddings"])
    assert e.value.code == 2 and capsys.readouterr().err == (
        "embedlab: error: --map gives 'a' twice (a=input_embeddings, a=output_embeddings); map "
        "each new name once\n")
    assert not (tmp_path / "s").exists()


def test_an_unreadable_source_vocabulary_is_no_write_failure(
        run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # said "cannot write OUT/vocab.tsv (Permission denied)" and left an empty OUT behind
    _vocab(run)
    real = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self == run / "vocab.tsv":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    out = tmp_path / "sub"
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--export-subset", str(out)])
    assert e.value.code == 2 and capsys.readouterr().err == (
        f"embedlab: error: cannot read {run / 'vocab.tsv'} (Permission denied); make it "
        "readable, then re-run the export (nothing was written)\n")
    assert not out.exists()


def test_no_best_recorded_names_the_index_file(tmp_path: Path) -> None:
    # "RUN has no best checkpoint recorded in checkpoint": the file's name alone read as a typo
    from embedlab.errors import InputError

    m = CheckpointManager(tmp_path / "run")
    m.save(3, {"input_embeddings": torch.zeros(2, 2)}, {"epoch": 0}, {})  # no loss: no best
    with pytest.raises(InputError, match=re.escape(
            f"{tmp_path / 'run'} has no best checkpoint recorded in "
            f"{tmp_path / 'run' / 'checkpoint'}; ")):
        find_checkpoint(tmp_path / "run", best=True)


def test_verify_of_a_run_whose_checkpoints_are_all_gone_exits_1(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # it exited 2 with the listing's refusal; --verify says 1 for a missing checkpoint
    for folder in (run / "checkpoints").iterdir():
        shutil.rmtree(folder)
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(run), "--verify"])
    out, err = capsys.readouterr()
    assert e.value.code == 1 and "NO: missing" in out and "failed the check" in err


def test_verify_after_a_kill_between_retention_and_the_index_passes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a save deletes what retention drops, then rewrites the index: killed in between, the
    # index lists a deleted folder while a newer unlisted checkpoint is there, and the run
    # resumes from that one; --verify called it damage, "restore them from a backup"
    m = CheckpointManager(tmp_path / "run", keep=1)
    tensors = {"input_embeddings": torch.zeros(4, 3)}
    m.save(1, tensors, {"epoch": 0}, {"loss": 1.0})
    index = (tmp_path / "run" / "checkpoint").read_text()
    m.save(2, tensors, {"epoch": 0}, {"loss": 0.5})
    (tmp_path / "run" / "checkpoint").write_text(index)  # the rewrite the kill cut short
    main(["ckpt", str(tmp_path / "run"), "--verify"])
    out, err = capsys.readouterr()
    assert "missing" not in out and err == ""
    assert find_checkpoint(tmp_path / "run").name == "ckpt-00000002"
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "ckpt-00000002")  # by hand: said
    with pytest.raises(SystemExit) as e:
        main(["ckpt", str(tmp_path / "run"), "--verify"])
    assert e.value.code == 1 and "NO: missing" in capsys.readouterr()[0]


def test_a_subset_is_built_aside_and_what_a_killed_one_left_is_removed(
        run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # killed outright mid-build, a subset left OUT/vocab.tsv and a checkpoint's tmp folder,
    # and the same command was then refused: "a folder holding other files"
    import subprocess
    import sys

    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)
    left = tmp_path / f".sub.tmp-{gone}-abcd1234"
    (left / "checkpoints").mkdir(parents=True)
    (left / "vocab.tsv").write_text("a\t3\n")
    main(["ckpt", str(run), "--export-subset", str(tmp_path / "sub")])
    assert "exported input_embeddings, output_embeddings to " \
        f"{tmp_path / 'sub' / 'checkpoints' / 'ckpt-00000005'}" in capsys.readouterr().out
    assert not left.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".sub")) == []
    tensors, _ = load_checkpoint(find_checkpoint(tmp_path / "sub"))
    assert sorted(tensors) == ["input_embeddings", "output_embeddings"]


def test_a_subset_copies_only_the_vocabulary_its_checkpoint_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # vocab.tsv edited, replaced, or linked to a file outside the run was copied into the
    # subset as it was (the readers refuse such a vocabulary; the subset carried it on)
    from embedlab.training.state import vocabulary_sha256

    run = tmp_path / "run"
    words = ["the", "king", "queen", "man"]
    CheckpointManager(run).save(1, {"input_embeddings": torch.ones(4, 3)},
                                {"epoch": 0, "vocabulary": vocabulary_sha256(words)}, {})
    secret = tmp_path / "secret.txt"
    secret.write_text("the\t9\nking\t5\nqueen\t4\nwoman\t3\n")  # four words, one of them other
    (run / "vocab.tsv").symlink_to(secret)
    code, _, err = run_cli(["ckpt", str(run), "--export-subset", str(tmp_path / "s")], capsys)
    assert code == 2 and f"{run / 'vocab.tsv'} is not the vocabulary ckpt-00000001 was " \
        "trained with" in err
    assert not (tmp_path / "s").exists()
    (run / "vocab.tsv").unlink()
    (run / "vocab.tsv").write_text("the\t9\nking\t5\nqueen\t4\nman\t3\n")
    _invoke(str(run), "--export-subset", str(tmp_path / "s"))
    assert (tmp_path / "s" / "vocab.tsv").read_text() == (run / "vocab.tsv").read_text()


def test_the_output_vectors_are_offered_only_where_the_checkpoint_has_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = CheckpointManager(tmp_path / "nce", keep=2)
    m.save(1, {"input_embeddings": torch.ones(4, 3), "output_embeddings": torch.ones(4, 3),
               "output_bias": torch.zeros(4)}, {"epoch": 0}, {"loss": 0.5})
    _vocab(tmp_path / "nce")
    code, _, err = run_cli(["ckpt", str(tmp_path / "nce"), "--export-subset", str(tmp_path / "s"),
                            "--names", "output_bias", "--map", "input_embeddings=output_bias"],
                           capsys)
    assert code == 2 and err.endswith("(drop the --map), or map output_embeddings\n"), err


@pytest.mark.parametrize("umask", [0o002, 0o022])
def test_a_subset_folder_gets_the_mode_the_umask_gives(run: Path, tmp_path: Path,
                                                       umask: int) -> None:
    # built by mkdtemp (0700) and renamed into place, colleagues could not open it
    import os

    _vocab(run)
    old = os.umask(umask)
    try:
        _invoke(str(run), "--export-subset", str(tmp_path / "sub"))
    finally:
        os.umask(old)
    assert (tmp_path / "sub").stat().st_mode & 0o777 == 0o777 & ~umask


def test_a_checkpoint_folder_that_cannot_be_entered_is_listed_as_failing(
        run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # one folder must not make the whole listing one error (in Python a PermissionError)
    from embedlab import checkpoints

    shut = run / "checkpoints" / "ckpt-00000005"
    real = Path.iterdir

    def iterdir(self: Path) -> Any:
        if self == shut:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    listed = {info.step: info for info in checkpoints(run)}
    assert not listed[5].verified and "cannot be read (Permission denied)" in str(listed[5].problem)
    assert listed[3].verified
