"""Run-folder handling: which config applies, run naming, --restart and --from moves."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import embedlab.training.trainer  # noqa: F401  (imported before any capsys test binds stderr)
from embedlab.checkpoint import CheckpointManager, find_checkpoint
from embedlab.cli import main
from embedlab.config import ModelConfig, TrainConfig, flatten
from embedlab.errors import InputError
from embedlab.run.folder import (
    abandon_after,
    check_run_dir,
    choose_run_dir,
    move_aside,
    resolve_config,
    stored_config,
)
from embedlab.testing import run_cli, write_zipf_corpus


def _store(run: Path, cfg: TrainConfig) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(cfg.to_dict()), encoding="utf-8")
    return run


def _checkpoints(run: Path, steps: tuple[int, ...]) -> CheckpointManager:
    m = CheckpointManager(run, keep=10)
    for s in steps:
        m.save(s, {"input_embeddings": np.full((2, 2), float(s), dtype=np.float32)},
               {"epoch": 0}, {})
    return m


# ---- check_run_dir / stored_config --------------------------------------------------------

def test_run_pointing_at_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("mine")
    with pytest.raises(InputError, match="is a file, not a folder; pass a folder path"):
        check_run_dir(f)
    assert f.read_text() == "mine"
    check_run_dir(tmp_path / "new")  # missing is fine: it is created
    (tmp_path / "empty").mkdir()
    check_run_dir(tmp_path / "empty")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")  # dangling: mkdir says "File exists"
    with pytest.raises(InputError) as e:
        check_run_dir(tmp_path / "link")
    assert str(e.value) == (f"--run {tmp_path / 'link'} is a symbolic link to "
                            f"{tmp_path / 'nowhere'}, which does not exist; create that folder, "
                            "or pass another --run")
    (tmp_path / "nowhere").mkdir()
    check_run_dir(tmp_path / "link")  # a link to a folder is a folder
    (tmp_path / "empty" / ".DS_Store").write_text("")  # hidden entries do not count
    (tmp_path / "empty" / ".prepared.tmp-abc").mkdir()
    check_run_dir(tmp_path / "empty")
    with pytest.raises(InputError, match="holding other files, not an embedlab run"):
        check_run_dir(tmp_path)  # holds the user's "file"
    # another program's config.json, metrics.jsonl or vocab.tsv makes no run: refused, so
    # that a run never writes over them
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 1}\n')
    (tmp_path / "vocab.tsv").write_text("hello\t3\n")
    with pytest.raises(InputError, match="holding other files, not an embedlab run"):
        check_run_dir(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    check_run_dir(tmp_path)  # a damaged run's: resolve_config says what is wrong
    (tmp_path / "config.json").write_text(json.dumps({"data": {}, "model": {}}))
    check_run_dir(tmp_path)  # embedlab's form


def test_stored_config_absent_is_none(tmp_path: Path) -> None:
    assert stored_config(tmp_path) is None


@pytest.mark.parametrize("text", ["{not json", '"a string"', "[]", '{"model": 5}',
                                  '{"optim": [1, 2]}'])
def test_damaged_config_json_is_an_input_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="is not a valid embedlab config"):
        stored_config(tmp_path)


# ---- resolve_config --------------------------------------------------------------------------

def test_new_run_takes_defaults_preset_and_flags(tmp_path: Path) -> None:
    cfg, stored = resolve_config(None, {"model": {"dim": 8}, "seed": 3}, None)
    assert stored is None and cfg.model.dim == 8 and cfg.seed == 3 and cfg.threads >= 1
    cfg, _ = resolve_config(None, {"model": {"dim": 8}}, "cs20")
    assert cfg.preset == "cs20" and cfg.model.dim == 8 and cfg.model.loss == "nce"


def test_resume_takes_the_stored_config(tmp_path: Path) -> None:
    stored = TrainConfig.from_dict({"model": {"dim": 8}, "optim": {"lr": 0.5}, "threads": 1,
                                    "max_steps": 10})
    run = _store(tmp_path / "run", stored)
    cfg, got = resolve_config(run, {}, None)
    assert got == stored.__class__.from_dict({**stored.to_dict(), "engine": "torch"})
    assert cfg.model.dim == 8 and cfg.optim.lr == 0.5 and cfg.threads == 1
    assert cfg.max_steps is None  # a stop point belongs to one invocation


def test_the_progress_display_belongs_to_one_invocation(tmp_path: Path) -> None:
    # a batch job's --no-progress, stored in config.json, left every later resume at a terminal
    # without its bar, silently
    stored = TrainConfig.from_dict({"model": {"dim": 8}, "threads": 1,
                                    "track": {"progress": False}})
    run = _store(tmp_path / "run", stored)
    assert resolve_config(run, {}, None)[0].track.progress is True
    assert resolve_config(run, {"track": {"progress": False}}, None)[0].track.progress is False


@pytest.mark.parametrize("explicit", [
    {"max_steps": 5}, {"checkpoint": {"keep": 1}}, {"track": {"log_every": 1}},
    {"optim": {"epochs": 9}}, {"model": {"dim": 8}}, {"eval": {"every_steps": 10}},
    {"max_steps": 5, "checkpoint": {"keep": 1, "every_steps": 3},
     "track": {"log_every": 1, "tensorboard": False}, "optim": {"epochs": 9}},
])
def test_resume_accepts_unchanged_or_mutable_flags(tmp_path: Path,
                                                   explicit: dict[str, Any]) -> None:
    run = _store(tmp_path / "run", TrainConfig.from_dict({"model": {"dim": 8}, "threads": 1}))
    cfg, stored = resolve_config(run, explicit, None)
    assert stored is not None
    # accepted is not enough: each flag given takes effect (a --max-steps or --keep dropped on
    # resume would run on to the end or keep the stored count), every other key is the run's
    want = flatten(stored.to_dict())  # the engine spelled out: runs before engines used torch
    want["max_steps"] = None  # a stop point belongs to one invocation
    want.update(flatten(explicit))
    assert flatten(cfg.to_dict()) == want
    assert cfg.model.dim == 8 and cfg.threads == 1 and cfg.engine == "torch"


def test_resume_refuses_and_names_each_key(tmp_path: Path) -> None:
    run = _store(tmp_path / "run", TrainConfig.from_dict({"model": {"dim": 8}, "threads": 1}))
    (run / "checkpoints" / "ckpt-00000010").mkdir(parents=True)  # it trained
    before = (run / "config.json").read_bytes()
    with pytest.raises(InputError) as e:
        resolve_config(run, {"model": {"dim": 9, "window": 2}, "optim": {"epochs": 1}}, None)
    msg = str(e.value)
    assert "--dim (stored 8, requested 9)" in msg and "--window" in msg
    assert "--epochs (stored 5, requested 1: it may be raised" in msg and "--restart" in msg
    assert "\n" not in msg
    assert (run / "config.json").read_bytes() == before


def test_a_run_without_a_checkpoint_takes_other_flags(tmp_path: Path) -> None:
    # Stopped while it was set up (a Ctrl-C in a --run folder that already existed): it left
    # config.json but trained nothing, and the corrected command was refused as a "resume" of
    # another config. Flags not given still come from the stored config.
    run = _store(tmp_path / "run", TrainConfig.from_dict({"model": {"dim": 8, "window": 3},
                                                          "threads": 1}))
    (run / "checkpoints" / "ckpt-00000010.tmp-123-4").mkdir(parents=True)  # a killed save
    cfg, stored = resolve_config(run, {"model": {"dim": 9}}, None)
    assert stored is None
    assert (cfg.model.dim, cfg.model.window) == (9, 3)


@pytest.mark.parametrize(("preset", "explicit", "stop"), [
    ("cs20", {}, 100_000), ("cs20", {"max_steps": 150_000}, 150_000), (None, {}, None)])
def test_a_preset_runs_resume_stops_where_the_preset_stops(
        tmp_path: Path, preset: str | None, explicit: dict[str, Any], stop: int | None) -> None:
    """cs20 stops at the lecture's 100,000 steps: the same command re-run after a Ctrl-C went
    on to the end of the data; --max-steps still chooses another stop, and train --run alone
    goes on through the epoch (docs/training.md)."""
    from embedlab.config import apply_preset

    stored = TrainConfig.from_dict(apply_preset("cs20", {"threads": 1}))
    run = _store(tmp_path / "run", stored)
    cfg, _ = resolve_config(run, explicit, preset)
    assert cfg.max_steps == stop


def test_resume_refuses_another_preset(tmp_path: Path) -> None:
    run = _store(tmp_path / "run", TrainConfig(threads=1))
    with pytest.raises(InputError) as refused:
        resolve_config(run, {}, "cs20")
    # it said "created with --preset None"
    assert str(refused.value) == (f"run {run} was created without --preset; drop --preset cs20 "
                                  "to resume, or use --restart / another --run")


def test_resume_with_other_threads_warns(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    run = _store(tmp_path / "run", TrainConfig(threads=1))
    cfg, _ = resolve_config(run, {"threads": 2}, None)
    assert cfg.threads == 2
    err = capsys.readouterr().err
    assert "warning: resuming with --threads 2 (the run used 1)" in err
    resolve_config(run, {"threads": 1}, None)
    assert capsys.readouterr().err == ""


def test_resume_with_other_threads_under_the_native_engine_is_silent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _store(tmp_path / "run", TrainConfig(threads=1, engine="native"))
    cfg, _ = resolve_config(run, {"threads": 2}, None)
    assert cfg.threads == 2 and cfg.engine == "native"
    assert capsys.readouterr().err == ""


def test_a_run_from_before_engines_resumes_with_torch(tmp_path: Path) -> None:
    run = _store(tmp_path / "run", TrainConfig(threads=1))  # engine "auto" in config.json
    cfg, _ = resolve_config(run, {}, None)
    assert cfg.engine == "torch"


def test_a_run_from_before_init_scale_keeps_word2vecs_scale(tmp_path: Path) -> None:
    run = _store(tmp_path / "run", TrainConfig(threads=1))
    raw = json.loads((run / "config.json").read_text(encoding="utf-8"))
    del raw["model"]["init_scale"]  # config.json as written before the key existed
    (run / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    stored = stored_config(run)
    assert stored is not None and stored.model.init_scale == 1.0
    cfg, _ = resolve_config(run, {}, None)
    assert cfg.model.init_scale == 1.0
    # a run that recorded its scale keeps it
    other = _store(tmp_path / "other", TrainConfig(threads=1, model=ModelConfig(init_scale=3.0)))
    assert resolve_config(other, {}, None)[0].model.init_scale == 3.0
    assert resolve_config(_store(tmp_path / "new", TrainConfig(threads=1)), {}, None
                          )[0].model.init_scale == 0.0  # 0: the model's default, resolved at use


def test_a_run_from_before_interleave_keeps_reading_in_order(tmp_path: Path) -> None:
    run = _store(tmp_path / "demo-sg-d8", resolve_config(None, {"model": {"dim": 8}}, None)[0])
    raw = json.loads((run / "config.json").read_text(encoding="utf-8"))
    del raw["optim"]["interleave"]  # config.json as written before the key existed
    (run / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    stored = stored_config(run)
    assert stored is not None and stored.optim.interleave == 1
    assert resolve_config(run, {}, None)[0].optim.interleave == 1
    # re-running its command finds it (no flag: the run's own 1, not the new default 2) ...
    assert choose_run_dir(tmp_path, {"model": {"dim": 8}}, None) == run
    # ... and so does naming its 1 explicitly (the name tag came later)
    explicit: dict[str, Any] = {"model": {"dim": 8}, "optim": {"interleave": 1}}
    assert choose_run_dir(tmp_path, explicit, None) == run
    # another value is another run
    other = {"model": {"dim": 8}, "optim": {"interleave": 3}}
    assert choose_run_dir(tmp_path, other, None) == tmp_path / "demo-sg-d8-il3"
    # a new run reads two parts and records it
    assert resolve_config(None, {}, None)[0].optim.interleave == 2


def test_only_a_run_without_the_key_is_taken_to_have_the_old_value(tmp_path: Path) -> None:
    """A run made with --run and --interleave 3 is not what a plain command resumes, although
    the name fits; a run from before --init-scale (recorded without the key) is."""
    _store(tmp_path / "demo-sg-d8", resolve_config(
        None, {"model": {"dim": 8}, "optim": {"interleave": 3}}, None)[0])
    assert choose_run_dir(tmp_path, {"model": {"dim": 8}}, None) == tmp_path / "demo-sg-d8-2"
    old = _store(tmp_path / "demo-sg-w3", resolve_config(None, {"model": {"window": 3}}, None)[0])
    raw = json.loads((old / "config.json").read_text(encoding="utf-8"))
    del raw["model"]["init_scale"]
    (old / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    assert choose_run_dir(tmp_path, {"model": {"window": 3}}, None) == old
    assert choose_run_dir(tmp_path, {"model": {"window": 3, "init_scale": 2.0}}, None
                          ) == tmp_path / "demo-sg-w3-is2"


def test_resume_with_threads_zero_resolves_to_a_count(tmp_path: Path) -> None:
    # --threads 0 means "all cores" on a new run; on resume it must be resolved too, not handed
    # to torch.set_num_threads(0), which raises.
    run = _store(tmp_path / "run", TrainConfig(threads=1))
    cfg, _ = resolve_config(run, {"threads": 0}, None)
    assert cfg.threads >= 1


# ---- moving between the GPU and the CPU ----------------------------------------------------

GPU = "NVIDIA H100 80GB HBM3"
WARNING = "results may differ in the last bits from an uninterrupted run"


def _machine(monkeypatch: pytest.MonkeyPatch, gpu: str | None) -> None:
    """Play a machine with the GPU model ``gpu`` for the cuda engine (None: one without)."""
    from embedlab.engines import cuda

    monkeypatch.setattr(cuda, "gpu_present", lambda: gpu is not None)
    monkeypatch.setattr(cuda, "interpreted", lambda: False)
    monkeypatch.setattr(cuda, "unavailable_reason",
                        lambda: None if gpu else "no CUDA device was found")
    monkeypatch.setattr(cuda, "device_name", lambda: gpu)


def _trained_on(run: Path, device: str | None) -> Path:
    """Give ``run`` a checkpoint and the env.json of a run trained on ``device`` (None: one
    written before devices were recorded)."""
    (run / "env.json").write_text(json.dumps({"threads": 1, **({"device": device} if device
                                                               else {})}), encoding="utf-8")
    _checkpoints(run, (1,))
    return run


def test_a_gpu_run_where_there_is_no_gpu_is_refused_naming_the_cpu_engine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, None)
    run = _trained_on(_store(tmp_path / "run", TrainConfig(threads=1, engine="cuda")), GPU)
    with pytest.raises(InputError) as e:
        resolve_config(run, {}, None)
    assert str(e.value) == (f"run {run} was trained with the cuda engine, which is unavailable "
                            "here (no CUDA device was found); pass --engine native to resume it "
                            f"on the CPU ({WARNING}), or --restart to start over")


@pytest.mark.parametrize("asked", ["native", "cpu"])  # --engine native, --device cpu
def test_a_gpu_run_goes_on_on_the_cpu_with_a_warning(
        asked: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, None)
    run = _trained_on(_store(tmp_path / "run", TrainConfig(threads=1, engine="cuda")), GPU)
    cfg, stored = resolve_config(run, {"engine": asked}, None)
    assert cfg.engine == "native" and stored is not None and stored.engine == "cuda"
    assert capsys.readouterr().err == (
        "embedlab: warning: resuming on the CPU with the native engine (the run trained on "
        f"{GPU} with the cuda engine); {WARNING}\n")


def test_a_cpu_run_goes_on_on_the_gpu_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, GPU)
    run = _trained_on(_store(tmp_path / "run", TrainConfig(threads=1, engine="native")), None)
    assert resolve_config(run, {}, None)[0].engine == "native"  # a run keeps its engine
    assert capsys.readouterr().err == ""
    assert resolve_config(run, {"engine": "cuda"}, None)[0].engine == "cuda"
    assert capsys.readouterr().err == (
        f"embedlab: warning: resuming on {GPU} with the cuda engine (the run trained on the "
        f"CPU with the native engine); {WARNING}\n")


def test_a_gpu_run_on_another_gpu_model_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, GPU)
    run = _trained_on(_store(tmp_path / "run", TrainConfig(threads=1, engine="cuda")),
                      "NVIDIA A100-SXM4-80GB")
    assert resolve_config(run, {}, None)[0].engine == "cuda"
    assert capsys.readouterr().err == (f"embedlab: warning: resuming on {GPU} (the run trained "
                                       f"on NVIDIA A100-SXM4-80GB); {WARNING}\n")
    _trained_on(run, GPU)
    assert resolve_config(run, {"engine": "cuda"}, None)[0].engine == "cuda"
    assert capsys.readouterr().err == ""  # the same model: the same bits


def test_a_gpu_run_without_a_checkpoint_resumes_silently(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, GPU)
    run = _store(tmp_path / "run", TrainConfig(threads=1, engine="cuda"))
    (run / "env.json").write_text(json.dumps({"device": "NVIDIA A100-SXM4-80GB"}))
    assert resolve_config(run, {}, None)[0].engine == "cuda"
    assert capsys.readouterr().err == ""  # nothing trained yet to differ from


@pytest.mark.parametrize("engine", ["native", "torch"])
def test_device_cpu_keeps_a_cpu_runs_engine(engine: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, GPU)
    run = _trained_on(_store(tmp_path / "run", TrainConfig(threads=1, engine=engine)), None)
    assert resolve_config(run, {"engine": "cpu"}, None)[0].engine == engine
    assert capsys.readouterr().err == ""


def test_a_gpu_run_is_found_by_its_command_on_either_device(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _machine(monkeypatch, GPU)
    explicit: dict[str, Any] = {"model": {"dim": 8}}
    cfg, _ = resolve_config(None, explicit, None)
    assert cfg.engine == "cuda"
    assert capsys.readouterr().err == (f"embedlab: note: training on {GPU} with the cuda engine "
                                       "(--device cpu trains on the CPU)\n")
    _store(tmp_path / "demo-sg-d8", cfg)
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8"
    assert capsys.readouterr().err == ""  # said once, by resolve_config
    assert choose_run_dir(tmp_path, {**explicit, "engine": "cpu"}, None) == tmp_path / "demo-sg-d8"
    _machine(monkeypatch, None)  # resolve_config then refuses, naming --engine native
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8"


# ---- choose_run_dir --------------------------------------------------------------------------

def test_choose_run_dir_names_reuses_and_disambiguates(tmp_path: Path) -> None:
    explicit = {"model": {"dim": 8}}
    first = choose_run_dir(tmp_path, explicit, None)
    assert first == tmp_path / "demo-sg-d8"
    cfg, _ = resolve_config(None, explicit, None)
    _store(first, cfg)
    assert choose_run_dir(tmp_path, {**explicit, "max_steps": 3}, None) == first  # resumes
    other = {"model": {"dim": 8}, "track": {"log_every": 1}, "optim": {"epochs": 1}}
    second = choose_run_dir(tmp_path, other, None)
    assert second == tmp_path / "demo-sg-d8-e1"
    (tmp_path / "demo-sg-d8-e1").write_text("a file, not a run")
    assert choose_run_dir(tmp_path, other, None) == tmp_path / "demo-sg-d8-e1-2"


def test_choose_run_dir_same_name_different_config_gets_a_suffix(tmp_path: Path) -> None:
    explicit: dict[str, object] = {"model": {"dim": 8}}
    name = choose_run_dir(tmp_path, explicit, None)
    stored = TrainConfig.from_dict({"model": {"dim": 8}, "data": {"lowercase": False},
                                    "init_from": "elsewhere"})
    _store(name, stored)
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8-2"


def test_a_run_named_before_the_min_lr_ratio_tag_is_still_found(tmp_path: Path) -> None:
    """Names now show --min-lr-ratio; a run an earlier version named without it (demo-sg-d8,
    or demo-sg-d8-2 beside another config) is found again, not started anew."""
    explicit: dict[str, Any] = {"model": {"dim": 8}, "optim": {"min_lr_ratio": 0.01}}
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8-mlr0.01"
    plain, _ = resolve_config(None, {"model": {"dim": 8}}, None)
    _store(tmp_path / "demo-sg-d8", plain)
    cfg, _ = resolve_config(None, explicit, None)
    _store(tmp_path / "demo-sg-d8-2", cfg)  # as the old naming left it
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8-2"
    assert choose_run_dir(tmp_path, {"model": {"dim": 8}}, None) == tmp_path / "demo-sg-d8"
    other = {"model": {"dim": 8}, "optim": {"min_lr_ratio": 0.5}}
    assert choose_run_dir(tmp_path, other, None) == tmp_path / "demo-sg-d8-mlr0.5"


def test_a_run_named_when_the_batch_default_was_1024_is_still_found(tmp_path: Path) -> None:
    """--batch-size 1024 was the default, so its runs' names have no b1024 tag: the same
    command finds such a run again rather than starting demo-sg-d8-b1024 from scratch."""
    explicit: dict[str, Any] = {"model": {"dim": 8}, "optim": {"batch_size": 1024}}
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8-b1024"
    cfg, _ = resolve_config(None, explicit, None)
    _store(tmp_path / "demo-sg-d8", cfg)  # as that version named it
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8"
    # the command without --batch-size is another run (today's 2048), beside it
    assert choose_run_dir(tmp_path, {"model": {"dim": 8}}, None) == tmp_path / "demo-sg-d8-2"
    # and earlier still, without a newer tag too
    explicit["optim"]["min_lr_ratio"] = 0.01
    cfg, _ = resolve_config(None, explicit, None)
    _store(tmp_path / "demo-sg-d8-2", cfg)
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8-2"


def _prepare(tmp_path: Path, *args: str) -> Path:
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    out = tmp_path / "prep"
    main(["prepare", str(corpus), "--out", str(out), "--no-progress", *args])
    return out


def _train(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    capsys.readouterr()
    code, _, err = run_cli(["train", *(str(a) for a in args)], capsys)
    return code, err


def _fast(prep: Path, runs: Path) -> list[str | Path]:
    """Flags for a tiny run on the prepared folder ``prep`` named under ``runs``."""
    return ["--corpus", prep, "--runs-dir", runs, "--dim", "8", "--batch-size", "32",
            "--epochs", "1", "--threads", "1", "--no-tensorboard", "--no-progress"]


def test_rerunning_train_on_a_prepared_folder_resumes_its_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the folder's --min-count 1 is the run's; choose_run_dir compared the stored config with
    # the default --min-count 5, so each re-run made another folder (-2, -3) instead of resuming
    prep = _prepare(tmp_path, "--min-count", "1", "--max-distinct", "1000")
    runs = tmp_path / "runs"
    fast = _fast(prep, runs)
    code, err = _train(capsys, *fast, "--max-steps", "1")
    assert code == 0, err
    code, err = _train(capsys, *fast, "--max-steps", "2")
    assert code == 0, err
    assert [p.name for p in runs.iterdir()] == ["prep-sg-d8-b32-e1-mc1"]
    assert "resuming" in err
    assert find_checkpoint(runs / "prep-sg-d8-b32-e1-mc1").name == "ckpt-00000002"


def test_a_new_run_takes_the_prepared_folders_max_distinct(tmp_path: Path) -> None:
    prep = _prepare(tmp_path, "--min-count", "1", "--max-distinct", "50")
    cfg, _ = resolve_config(None, {"data": {"corpus": str(prep)}}, None)
    assert cfg.data.max_distinct == 50 and cfg.data.min_count == 1
    # a flag given still wins (trainer._check_prepared_matches judges it)
    cfg, _ = resolve_config(None, {"data": {"corpus": str(prep), "max_distinct": 70}}, None)
    assert cfg.data.max_distinct == 70


def test_a_run_folder_inside_the_corpus_folder_names_the_run_not_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 'train --corpus .': the run lands in ./runs, inside the corpus; the error named --out,
    # a flag train does not have
    write_zipf_corpus(tmp_path / "c.txt", lines=50)
    monkeypatch.chdir(tmp_path)
    code, err = _train(capsys, "--corpus", ".", "--epochs", "1", "--no-tensorboard",
                       "--no-progress")
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [
        "embedlab: error: the run folder runs/corpus-sg-e1 is inside the corpus folder .; its "
        "files would be read as corpus text — pass --run or --runs-dir outside it"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


# ---- --restart / --from moves ------------------------------------------------------------

def test_move_aside_keeps_everything(tmp_path: Path) -> None:
    run = _store(tmp_path / "run", TrainConfig())
    (run / "extra.txt").write_text("keep me")
    first = move_aside(run)
    assert not run.exists() and first.name.startswith("run.old-")
    assert (first / "extra.txt").read_text() == "keep me" and (first / "config.json").is_file()
    _store(run, TrainConfig())
    second = move_aside(run)  # same second: a distinct name, nothing overwritten
    assert second != first and first.is_dir() and second.is_dir()


def test_abandon_after_moves_newer_checkpoints(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _checkpoints(run, (2, 4, 6, 8))
    moved = abandon_after(run, 4)
    assert [p.name for p in moved] == ["ckpt-00000006", "ckpt-00000008"]
    assert all(p.is_dir() and (p / "MANIFEST.json").is_file() for p in moved)
    assert moved[0].parent.name.startswith("checkpoints-abandoned-")
    left = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert left == ["ckpt-00000002", "ckpt-00000004"]
    assert abandon_after(run, 4) == []


def test_abandon_twice_in_one_second_keeps_both_branches(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _checkpoints(run, (2, 4, 6))
    first = abandon_after(run, 4)
    second = abandon_after(run, 2)
    assert first and second and first[0].is_dir() and second[0].is_dir()
    assert {p.name for p in (*first, *second)} == {"ckpt-00000004", "ckpt-00000006"}


def test_abandon_after_without_checkpoints(tmp_path: Path) -> None:
    assert abandon_after(tmp_path, 3) == []


def test_another_max_distinct_is_refused_only_for_a_pruned_prepared_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The limit decided a folder's counts only if it pruned; then another one is another
    vocabulary, refused like another --min-count."""
    fast = ["--dim", "8", "--batch-size", "32", "--epochs", "1", "--threads", "1",
            "--no-tensorboard", "--no-progress", "--max-steps", "1"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pruned = _prepare(tmp_path / "a", "--min-count", "1", "--max-distinct", "50")
    code, err = _train(capsys, "--corpus", pruned, "--run", tmp_path / "r1", *fast,
                       "--max-distinct", "70")
    assert code == 2 and err.strip().splitlines() == [
        f"embedlab: error: prepared corpus {pruned} was built with other vocabulary options: "
        "--max-distinct 70 (prepared with --max-distinct 50); drop those flags or re-run "
        "'embedlab prepare' into it with them and --force"]
    assert not (tmp_path / "r1").exists()
    whole = _prepare(tmp_path / "b", "--min-count", "1")
    code, err = _train(capsys, "--corpus", whole, "--run", tmp_path / "r2", *fast,
                       "--max-distinct", "100000")
    assert code == 0, err


def test_an_explicit_run_inside_the_corpus_folder_names_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_zipf_corpus(tmp_path / "c.txt", lines=50)
    run = tmp_path / "inside"
    code, err = _train(capsys, "--corpus", tmp_path, "--run", run, "--epochs", "1",
                       "--no-tensorboard", "--no-progress")
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [
        f"embedlab: error: the run folder {run} is inside the corpus folder {tmp_path}; its "
        "files would be read as corpus text — pass --run or --runs-dir outside it"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_an_earlier_cbow_run_on_the_torch_engine_is_found_by_its_command(
        tmp_path: Path) -> None:
    """auto meant torch for CBOW before the native engine had CBOW; such a run stored torch and
    must still be the one 'train --model cbow' (no --engine) resumes."""
    explicit: dict[str, Any] = {"model": {"model": "cbow", "dim": 8}}
    cfg, _ = resolve_config(None, explicit, None)
    assert cfg.engine == "native"
    _store(tmp_path / "demo-cbow-d8", dataclasses.replace(cfg, engine="torch"))
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-cbow-d8"
    # asking for the other engine explicitly is another run
    assert choose_run_dir(tmp_path, {**explicit, "engine": "native"}, None) == \
        tmp_path / "demo-cbow-d8-2"


def _as_an_earlier_versions_checkpoint(ckpt: Path) -> None:
    """Drop the settings a checkpoint records (versions before the record wrote none), with
    the manifest made to match again."""
    import hashlib

    state = json.loads((ckpt / "state.json").read_text())
    del state["settings"]
    data = json.dumps(state).encode()
    (ckpt / "state.json").write_bytes(data)
    manifest = json.loads((ckpt / "MANIFEST.json").read_text())
    manifest["files"]["state.json"] = {"sha256": hashlib.sha256(data).hexdigest(),
                                       "size": len(data)}
    (ckpt / "MANIFEST.json").write_text(json.dumps(manifest))


def test_an_earlier_run_on_a_pruned_prepared_folder_still_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Runs made before a new run took the folder's --max-distinct recorded the default; both
    the command without --run and the resume itself must still accept them."""
    prep = _prepare(tmp_path, "--min-count", "1", "--max-distinct", "50")
    runs = tmp_path / "runs"
    fast = _fast(prep, runs)
    code, err = _train(capsys, *fast, "--max-steps", "1")
    assert code == 0, err
    (run,) = runs.iterdir()
    raw = json.loads((run / "config.json").read_text())
    assert raw["data"]["max_distinct"] == 50
    raw["data"]["max_distinct"] = 10_000_000  # as an earlier version recorded it
    (run / "config.json").write_text(json.dumps(raw))
    _as_an_earlier_versions_checkpoint(find_checkpoint(run))
    code, err = _train(capsys, *fast, "--max-steps", "2")
    assert code == 0, err
    assert [p.name for p in runs.iterdir()] == [run.name] and "resuming" in err
    assert find_checkpoint(run).name == "ckpt-00000002"


def test_a_stored_run_outside_todays_new_run_checks_still_resumes(tmp_path: Path) -> None:
    # --sample 5 was accepted once; a run stored with it resumes, only a new run is refused
    run = tmp_path / "run"
    raw = TrainConfig().to_dict()
    raw["model"]["sample"] = 5.0
    (run / "checkpoints" / "ckpt-00000010").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(raw))
    cfg, stored = resolve_config(run, {}, None)
    assert stored is not None and cfg.model.sample == 5.0
    with pytest.raises(InputError, match=r"--sample must be below 1, got 5\.0"):
        resolve_config(tmp_path / "new", {"model": {"sample": 5.0}}, None)


def test_another_spelling_of_the_corpus_resumes_the_named_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``corpus.txt``, ``./corpus.txt`` and its absolute path are one corpus: a re-run with any
    of them finds the run the first made, from another working folder too, and another file
    of the same name is another run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.txt").write_text("a b c\n", encoding="utf-8")
    runs = tmp_path / "runs"
    run = _store(runs / "corpus-sg-d8", resolve_config(
        None, {"data": {"corpus": "corpus.txt"}, "model": {"dim": 8}}, None)[0])
    (run / "env.json").write_text(json.dumps({"cwd": str(tmp_path)}), encoding="utf-8")
    for spelled in ("./corpus.txt", str(tmp_path / "corpus.txt")):
        explicit = {"data": {"corpus": spelled}, "model": {"dim": 8}}
        assert choose_run_dir(runs, explicit, None) == run
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    explicit = {"data": {"corpus": "../corpus.txt"}, "model": {"dim": 8}}
    assert choose_run_dir(Path("../runs"), explicit, None) == Path("../runs/corpus-sg-d8")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "corpus.txt").write_text("a b c\n", encoding="utf-8")
    explicit = {"data": {"corpus": "../data/corpus.txt"}, "model": {"dim": 8}}
    assert choose_run_dir(Path("../runs"), explicit, None) == Path("../runs/corpus-sg-d8-2")


@pytest.mark.parametrize("key", ["optim.batch_size", "optim.epochs", "model.dim", "data"])
def test_a_config_that_lost_a_setting_every_run_records_is_refused(
        tmp_path: Path, key: str) -> None:
    """A default in place of a lost optim.batch_size or optim.epochs resumed another run (or
    crashed deep in the step); a lost interleave is a run from before the option, read as 1."""
    run = _store(tmp_path / "run", TrainConfig())
    raw = json.loads((run / "config.json").read_text())
    section, _, name = key.partition(".")
    if name:
        del raw[section][name]
    else:
        del raw[section]
    (run / "config.json").write_text(json.dumps(raw))
    with pytest.raises(InputError) as e:
        stored_config(run)
    assert str(e.value).startswith(f"{run / 'config.json'} lacks {key}")
    assert str(e.value).endswith("which every run records; restore it from a backup, or pass "
                                 "--restart to start over")
    raw = json.loads(json.dumps(TrainConfig().to_dict()))
    del raw["optim"]["interleave"]
    (run / "config.json").write_text(json.dumps(raw))
    cfg = stored_config(run)
    assert cfg is not None and cfg.optim.interleave == 1


def test_an_explicit_auto_engine_keeps_the_runs_engine(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    # --engine auto, the default typed out, was refused on a torch run as "requested 'native'"
    _machine(monkeypatch, None)
    run = _trained_on(_store(tmp_path / "run", TrainConfig(threads=1, engine="torch")), None)
    assert resolve_config(run, {"engine": "auto"}, None)[0].engine == "torch"
    assert capsys.readouterr().err == ""


def test_init_from_spelled_another_way_is_the_same_run(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # ./src/ for src (or an absolute path) was "a different config", as --corpus is not
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path)
    run = _trained_on(_store(tmp_path / "run", TrainConfig(threads=1, init_from="src")), None)
    for spelled in ("./src/", str(tmp_path / "src")):
        assert resolve_config(run, {"init_from": spelled}, None)[0].init_from == "src"
    with pytest.raises(InputError, match=r"--init-from \(stored 'src', requested 'other'\)"):
        (tmp_path / "other").mkdir()
        resolve_config(run, {"init_from": "other"}, None)
    # the run found by its name too, not a new numbered one
    runs = tmp_path / "runs"
    named = choose_run_dir(runs, {"init_from": "src"}, None)
    _store(named, resolve_config(None, {"init_from": "src"}, None)[0])
    assert choose_run_dir(runs, {"init_from": "./src/"}, None) == named


def test_a_restart_of_a_torch_run_says_the_engine_is_this_calls(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # it said "starting over with its settings" and the new run trained on the native engine
    from embedlab.run.folder import restart_options, say_restart_engine

    run = _store(tmp_path / "run", TrainConfig(threads=1, engine="torch"))
    options = restart_options(run, {})
    assert options is not None and "engine" not in options
    say_restart_engine(run, {})
    assert "the old run trained with the torch engine; the new one takes this machine's " \
           "choice (pass --engine torch to keep torch)" in capsys.readouterr().err
    say_restart_engine(run, {"engine": "torch"})
    assert capsys.readouterr().err == ""


def test_a_run_named_by_an_ascii_only_corpus_tag_is_still_found(tmp_path: Path) -> None:
    """Runs on ``Текст.txt`` were named ``_-sg-...``; they are named ``Текст-sg-...`` now, and a
    re-run of the old command resumes the old folder."""
    corpus = tmp_path / "Текст.txt"
    corpus.write_text("один два три\n" * 50, encoding="utf-8")
    runs = tmp_path / "runs"
    explicit: dict[str, Any] = {"data": {"corpus": str(corpus)}, "model": {"dim": 8}}
    assert choose_run_dir(runs, explicit, None) == runs / "Текст-sg-d8"
    old = _store(runs / "_-sg-d8", resolve_config(None, explicit, None)[0])
    assert choose_run_dir(runs, explicit, None) == old
    other = {**explicit, "model": {"dim": 16}}  # another config is another run, by the new name
    assert choose_run_dir(runs, other, None) == runs / "Текст-sg-d16"


def test_settings_another_runs_engine_cannot_train_make_a_new_run(tmp_path: Path) -> None:
    """A native run found under an earlier name (no mb tag, batch size 1024 the old default)
    was compared on its engine, and --micro-batches 2 was refused ("trains on the torch and cuda
    engines") instead of starting the run it names."""
    _store(tmp_path / "demo-sg-d8", resolve_config(None, {"model": {"dim": 8}}, None)[0])
    explicit: dict[str, Any] = {"model": {"dim": 8},
                                "optim": {"micro_batches": 2, "batch_size": 1024}}
    assert choose_run_dir(tmp_path, explicit, None) == tmp_path / "demo-sg-d8-b1024-mb2"
