"""Run folders made by an earlier embedlab resume with today's code and finish bit-identical.

``tests/fixtures/legacy_runs/`` holds tiny runs stopped part-way with ``--max-steps`` by
earlier versions (commits c9eeca4 and f3cb018, whose batches were drawn before the batch
specification, and 790c90e, whose micro-batch steps took consecutive batches; how: the
README.md there). Each is copied, resumed the way a user
does it (``embedlab train --run RUN``, nothing else, from a folder without the corpus: the run's
``prepared/`` must suffice), and its final checkpoint must hold the very tensors that version
wrote when it resumed the folder, which were also those of an uninterrupted run of the same
command. The expected SHA-256s, steps and logged scalars below were recorded with those versions;
they are not to be regenerated with newer code, or a change of results would pass unnoticed.

The native kernel is built with ``-march=native`` and PyTorch picks its CPU kernels by the
processor, so the recorded bits are those of the machine class the fixtures were made on (their
``env.json`` names its CPU); another CPU rounds otherwise from the first step. There the
recorded bits cannot be met by any code, and what is checked instead is what holds on every
machine: the legacy run resumes exactly — resumed to its end in one go, and stopped once more
part-way and resumed again, it ends with the same bits — and logs the same steps and tags.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_runs"


@dataclass(frozen=True)
class Legacy:
    name: str
    start_step: int  # the fixture's latest checkpoint
    final_step: int
    tensors_sha256: str  # of checkpoints/ckpt-<final>/tensors.safetensors
    metrics: list[dict[str, Any]]  # metrics.jsonl without the *_per_sec rates (timings)
    # TensorBoard: the steps of every non-scalar tag, as EventAccumulator shows them
    event_steps: dict[str, list[int]] = field(default_factory=dict)
    # the command that made it, less --run and --max-steps (README.md there)
    flags: str = ""


CASES = [
    Legacy(
        name="skipgram-neg-tb",  # skip-gram, negative sampling, native, TensorBoard on
        start_step=10,
        final_step=24,
        tensors_sha256="55760ea63b4a5071de412d32ab7125e9dd308166362f14b9a1724f7a6304be43",
        metrics=[
            {"step": 4, "train/loss": 3.798854809829453, "train/lr": 0.02212478184991274,
             "train/progress": 0.15602094240837697},
            {"step": 8, "train/loss": 3.677975804522811, "train/lr": 0.017940663176265272,
             "train/progress": 0.32338568935427575},
            {"step": 12, "train/loss": 3.6908026371197202, "train/lr": 0.01287521815008726,
             "train/progress": 0.5},
            {"step": 16, "train/loss": 3.5699689632747322, "train/lr": 0.009816753926701572,
             "train/progress": 0.6488656195462478},
            {"step": 20, "train/loss": 3.5255407727395114, "train/lr": 0.005157068062827225,
             "train/progress": 0.8551483420593369},
            {"step": 24, "train/loss": 3.5101906667472025, "train/lr": 0.0004406631762652713,
             "train/progress": 1.0},
            {"step": 24, "final/loss": 3.5101906667472025},
        ],
        event_steps={tag: [5, 10, 15, 20, 24] for tag in (
            "embeddings/pca", "embeddings/input", "embeddings/input_norm", "embeddings/output",
            "embeddings/output_norm", "neighbours/text_summary")},
    ),
    Legacy(
        name="cbow-nce",  # CBOW, NCE, native, --no-tensorboard
        flags="--corpus corpus.txt --model cbow --loss nce --engine native --no-tensorboard "
              "--dim 8 --epochs 2 --batch-size 32 --threads 1 --checkpoint-every 4 --log-every 5",
        start_step=15,
        final_step=24,
        tensors_sha256="160bcc4b964bc2d06ca3a3e4aad639013b486ccb5eafdf40987bd00f91a8dea1",
        metrics=[
            {"step": 5, "train/loss": 5.799141802180272, "train/lr": 0.021099476439790578,
             "train/progress": 0.21134380453752183},
            {"step": 10, "train/loss": 5.202354567330501, "train/lr": 0.015383944153577661,
             "train/progress": 0.4350785340314136},
            {"step": 15, "train/loss": 4.515702387822844, "train/lr": 0.010728621291448519,
             "train/progress": 0.6073298429319371},
            {"step": 20, "train/loss": 4.020183090543099, "train/lr": 0.005157068062827225,
             "train/progress": 0.8551483420593369},
            # the last, partial logging window (steps 21-24 of --log-every 5) has no train/lr
            {"step": 24, "train/loss": 3.9548711975570767, "train/progress": 1.0,
             "train/lr": 0.0004406631762652713},
            {"step": 24, "final/loss": 3.9548711975570767},
        ],
    ),
    Legacy(
        name="skipgram-hs",  # skip-gram, hierarchical softmax, subsampling, made by f3cb018
        start_step=13,
        final_step=89,
        tensors_sha256="e7f43866c55f695200bff6965fe9fd0f9ceb387ce11dd8fc1cdcfe054ccf8445",
        metrics=[
            {"step": 5, "train/loss": 2.919049846916868, "train/lr": 0.02400087260034904,
             "train/progress": 0.05043630017452007},
            {"step": 10, "train/loss": 2.702091342283164, "train/lr": 0.02253926701570681,
             "train/progress": 0.11204188481675392},
            {"step": 15, "train/loss": 2.701267984950984, "train/lr": 0.02106020942408377,
             "train/progress": 0.17015706806282724},
            {"step": 20, "train/loss": 2.6960827504182, "train/lr": 0.01955061082024433,
             "train/progress": 0.22897033158813263},
            {"step": 25, "train/loss": 2.7997343900411025, "train/lr": 0.018211169284467716,
             "train/progress": 0.28429319371727746},
            {"step": 30, "train/loss": 2.6361837947343942, "train/lr": 0.016775741710296683,
             "train/progress": 0.34101221640488655},
            {"step": 35, "train/loss": 2.72530945059326, "train/lr": 0.015222513089005235,
             "train/progress": 0.4027923211169284},
            {"step": 40, "train/loss": 2.671297084995966, "train/lr": 0.013743455497382201,
             "train/progress": 0.462478184991274},
            {"step": 45, "train/loss": 2.77352725702288, "train/lr": 0.0125,
             "train/progress": 0.5095986038394416},
            {"step": 50, "train/loss": 2.764483216124168, "train/lr": 0.011247818499127399,
             "train/progress": 0.5619546247818499},
            {"step": 55, "train/loss": 2.6129536492963017, "train/lr": 0.009816753926701572,
             "train/progress": 0.618324607329843},
            {"step": 60, "train/loss": 2.6545292905398776, "train/lr": 0.008451134380453751,
             "train/progress": 0.6731239092495637},
            {"step": 65, "train/loss": 2.638153784158753, "train/lr": 0.007107329842931937,
             "train/progress": 0.7287958115183246},
            {"step": 70, "train/loss": 2.7782809093112233, "train/lr": 0.005802792321116929,
             "train/progress": 0.7809773123909249},
            {"step": 75, "train/loss": 2.7034673828246265, "train/lr": 0.004315008726003491,
             "train/progress": 0.8439790575916231},
            {"step": 80, "train/loss": 2.697174236114989, "train/lr": 0.0026832460732984288,
             "train/progress": 0.9052356020942408},
            {"step": 85, "train/loss": 2.6625464790595506, "train/lr": 0.0012609075043630014,
             "train/progress": 0.9603839441535776},
            {"step": 89, "train/loss": 2.751725531835109, "train/progress": 1.0,
             "train/lr": 0.00013525305410122258},
            {"step": 89, "final/loss": 2.751725531835109},
        ],
    ),
    Legacy(
        name="skipgram-neg-micro",  # torch engine, --micro-batches 2 of consecutive batches,
        start_step=17,              # made by 790c90e
        flags="--corpus corpus.txt --model skipgram --loss neg --engine torch --micro-batches 2 "
              "--no-tensorboard --dim 8 --epochs 2 --batch-size 16 --threads 1 "
              "--checkpoint-every 6 --log-every 5",
        final_step=23,
        tensors_sha256="f72f5a2a9dcdd4d96e460daf3639b7d3a5cbf0a32bf00580a880682a2bc82b05",
        metrics=[
            {"step": 5, "train/loss": 3.783007217773601, "train/lr": 0.020327225130890053,
             "train/progress": 0.24083769633507854},
            {"step": 10, "train/loss": 3.7325872807364378, "train/lr": 0.014018324607329845,
             "train/progress": 0.4799301919720768},
            {"step": 15, "train/loss": 3.624827859437336, "train/lr": 0.009162303664921467,
             "train/progress": 0.6699825479930192},
            {"step": 20, "train/loss": 3.5102809634013674, "train/lr": 0.003686736474694591,
             "train/progress": 0.8904013961605585},
            {"step": 23, "train/loss": 3.480710283174353, "train/progress": 1.0,
             "train/lr": 0.00041884816753926803},
            {"step": 23, "final/loss": 3.480710283174353},
        ],
    ),
]


def _made_on_this_machine_class(case: Legacy) -> bool:
    """Whether this CPU is the one the fixture was made on (see the module's docstring)."""
    from embedlab.run.provenance import cpu_model

    made = json.loads((FIXTURES / case.name / "env.json").read_text(encoding="utf-8"))
    return bool(made.get("cpu") == cpu_model())


def _resume(run: Path, cwd: Path, *extra: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "embedlab", "train", "--run", str(run), *extra],
                          cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _final_sha256(run: Path, case: Legacy) -> str:
    tensors = run / "checkpoints" / f"ckpt-{case.final_step:08d}" / "tensors.safetensors"
    return hashlib.sha256(tensors.read_bytes()).hexdigest()


def _metrics(run: Path) -> list[dict[str, Any]]:
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.endswith("_per_sec")}
            for line in lines if line.strip()]


def _check_events(run: Path, case: Legacy, *, values: bool = True) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run), size_guidance={"scalars": 0, "tensors": 0, "images": 0,
                                                    "histograms": 0}).Reload()
    tags = acc.Tags()
    # scalars: each logged step once, the values of metrics.jsonl (stored as float32)
    for tag in ("train/loss", "train/lr", "train/progress", "final/loss"):
        want = [(m["step"], float(np.float32(m[tag]))) for m in case.metrics if tag in m]
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        if not values:  # the steps logged, not the values (another CPU's rounding)
            want, got = [w[0] for w in want], [g[0] for g in got]
        assert got == want, tag
    steps = {tag: [e.step for e in acc.Images(tag)] for tag in tags["images"]}
    steps |= {tag: [e.step for e in acc.Histograms(tag)] for tag in tags["histograms"]}
    steps |= {tag: [e.step for e in acc.Tensors(tag)] for tag in tags["tensors"]}
    assert steps == case.event_steps


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_legacy_run_resumes_bit_identical(case: Legacy, tmp_path: Path) -> None:
    run = tmp_path / case.name
    shutil.copytree(FIXTURES / case.name, run)
    cwd = tmp_path / "elsewhere"  # the run recorded --corpus corpus.txt, absent here
    cwd.mkdir()
    _resume(run, cwd)
    # resumed, not started over: the run's record is the fixture's, with one resume added, and
    # the fixture's checkpoint is still there, untouched (unless retention has dropped it)
    env, made = (json.loads((folder / "env.json").read_text()) for folder in
                 (run, FIXTURES / case.name))
    assert env["created"] == made["created"] and len(env["resumes"]) == 1
    start = f"checkpoints/ckpt-{case.start_step:08d}/MANIFEST.json"
    if (run / start).exists():
        assert (run / start).read_bytes() == (FIXTURES / case.name / start).read_bytes()

    status = json.loads((run / "status.json").read_text(encoding="utf-8"))
    assert (status["status"], status["step"]) == ("finished", case.final_step)
    index = (run / "checkpoint").read_text(encoding="utf-8")
    assert f"latest: ckpt-{case.final_step:08d}" in index.splitlines()
    same_class = _made_on_this_machine_class(case)
    if same_class:
        assert _final_sha256(run, case) == case.tensors_sha256
        assert _metrics(run) == case.metrics
    else:
        twice = tmp_path / "twice"
        shutil.copytree(FIXTURES / case.name, twice)
        _resume(twice, cwd, "--max-steps", str(case.start_step + 2))
        _resume(twice, cwd)
        assert _final_sha256(twice, case) == _final_sha256(run, case)
        kept = [m for m in case.metrics if m["step"] <= case.start_step]  # the fixture's rows
        assert _metrics(run)[:len(kept)] == kept
        assert [(m["step"], sorted(m)) for m in _metrics(run)] == \
            [(m["step"], sorted(m)) for m in case.metrics]
    if case.event_steps:
        _check_events(run, case, values=same_class)
    else:
        assert not list(run.glob("events.out.tfevents.*"))


@pytest.mark.parametrize("case", [c for c in CASES if c.flags], ids=lambda c: c.name)
def test_a_legacy_run_found_by_name_resumes_again_and_again(case: Legacy, tmp_path: Path) -> None:
    """The command that made the run, typed again without --run, finds it by name each time:
    after its first resume has written today's keys with that version's values (--interleave 1,
    --init-scale 1, consecutive micro-batches) too, and it finishes with that version's bits."""
    from embedlab.run.folder import stored_config
    from embedlab.run.naming import run_name
    from embedlab.testing import write_zipf_corpus

    write_zipf_corpus(tmp_path / "corpus.txt", lines=300, vocab=16, seed=0)
    stored = stored_config(FIXTURES / case.name)
    assert stored is not None
    run = tmp_path / "runs" / run_name(stored, legacy=True)
    shutil.copytree(FIXTURES / case.name, run)
    argv = [sys.executable, "-m", "embedlab", "train", *case.flags.split()]
    for extra, step in (["--max-steps", str(case.start_step + 3)], case.start_step + 3), ([], None):
        proc = subprocess.run(argv + extra, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"resuming {run.relative_to(tmp_path)}" in proc.stderr, proc.stderr
        assert step is None or f"step {step}" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [run.name]
    if _made_on_this_machine_class(case):
        assert _final_sha256(run, case) == case.tensors_sha256
    else:  # this machine's bits: those of the fixture resumed in one go (see the docstring)
        once = tmp_path / "once"
        shutil.copytree(FIXTURES / case.name, once)
        _resume(once, tmp_path)
        assert _final_sha256(run, case) == _final_sha256(once, case)
