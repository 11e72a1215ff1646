"""``embedlab train``: parse the flags and call :func:`embedlab.training.api.train`."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from embedlab.cli.output import echo

if TYPE_CHECKING:
    from embedlab.training.state import TrainResult


@click.command(context_settings={"show_default": True})
@click.option("--corpus", help="demo (built in), text8 (downloaded), a file/folder (.gz/.bz2/.xz "
              "ok) or a folder made by 'embedlab prepare'.  [default: demo]")
@click.option("--run", "run", type=click.Path(path_type=str),
              help="Run folder: created, or resumed from its latest verified checkpoint.")
@click.option("--runs-dir", type=click.Path(path_type=str), default="runs",
              help="Parent of auto-named run folders (used without --run).")
@click.option("--preset", type=click.Choice(["cs20"]), help="A named configuration (cs20: the "
              "CS20 lecture's word2vec); explicit flags override it.")
@click.option("--model", type=click.Choice(["skipgram", "cbow"]), help="[default: skipgram]")
@click.option("--loss", type=click.Choice(["neg", "nce", "hs"]),
              help="Negative sampling (a noise word equal to the pair's target is skipped, "
              "as in word2vec), noise-contrastive estimation (kept, as in TensorFlow's "
              "nce_loss) or hierarchical softmax over the vocabulary's Huffman tree "
              "(word2vec's -hs 1; draws no noise words).  [default: neg]")
@click.option("--dim", type=int, help="Embedding size.  [default: 100]")
@click.option("--window", type=int, help="Maximum window; each centre draws 1..window.  "
              "[default: 5]")
@click.option("--negative", type=int, help="Noise words per positive pair (K); ignored by "
              "--loss hs, which also takes 0 (gensim's hs=1, negative=0).  [default: 5]")
@click.option("--shared-negatives", type=int, help="Noise words drawn per group of centres and "
              "shared by it (0 = ⌈4/3·K·(window+1)⌉, a third more than word2vec draws per "
              "centre).  [default: 0]")
@click.option("--negative-group", type=int, help="Centres sharing one set of noise words "
              "(smaller is closer to word2vec, slower; the group is gcd(this, --batch-size); "
              "--loss nce with an explicit --shared-negatives shares them across the whole "
              "batch, as TensorFlow's nce_loss).  [default: 32]")
@click.option("--noise-exponent", type=float, help="Noise ∝ count^alpha.  [default: 0.75]")
@click.option("--sample", type=float, help="Subsampling threshold t (0 = off).  [default: 0.001]")
@click.option("--init", type=click.Choice(["centered", "uniform"]),
              help="Input-vector initialisation.  [default: centered]")
@click.option("--init-scale", type=float, help="Centred initialisation U(-S/2, S/2)/dim "
              "(1: word2vec.c's, 2: gensim's; 0: 8 for skip-gram, 12 for CBOW).  [default: 0]")
@click.option("--min-count", type=int, help="Drop words rarer than this.  [default: 5]")
@click.option("--max-vocab", type=int, help="Keep the N most frequent words (incl. --unk).")
@click.option("--unk", help="Map out-of-vocabulary words to this token (id 0).")
@click.option("--lowercase/--no-lowercase", default=None, help="Lowercase tokens.  [default: off]")
@click.option("--max-distinct", type=int, help="Prune rare words while counting beyond this "
              "many distinct words.  [default: 10000000]")
@click.option("--epochs", type=int, help="[default: 5]")
@click.option("--lr", type=float, help="Initial learning rate; decays linearly to "
              "lr * --min-lr-ratio.  [default: 0.025]")
@click.option("--min-lr-ratio", type=float, help="Final lr as a fraction of --lr.  "
              "[default: 0.0001]")
@click.option("--batch-size", type=int, help="Centre words per step.  [default: 2048]")
@click.option("--interleave", type=int, help="Read the corpus as N interleaved parts, 4,096 "
              "tokens from each in turn, as word2vec's threads read it (1 = in order; a run "
              "whose config.json has no interleave keeps 1).  [default: 2]")
@click.option("--micro-batches", type=int, help="Train M batches as one step, each from its "
              "own chunk of the corpus (one rate, one synchronous update), as processes "
              "training one run share a step; "
              "keep M x --batch-size near 2048 for quality; torch or cuda engine.  [default: 1]")
@click.option("--seed", type=int, help="Master seed for every random stream.  [default: 1]")
@click.option("--threads", type=int, help="CPU threads (0 = all cores).  [default: 0]")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where to train: cuda is --engine cuda; cpu: native, else torch; auto: the "
              "GPU where one is found (saying so), else the CPU.  [default: auto]")
@click.option("--engine", type=click.Choice(["auto", "native", "torch", "cuda"]),
              help="native: the fused C kernel (skip-gram and CBOW; built on first use with the "
              "machine's C compiler); torch: PyTorch ops; cuda: Triton kernels on one NVIDIA "
              "GPU (--loss neg or nce); auto: cuda on a GPU, else native when it builds, else "
              "torch.  [default: auto]")
@click.option("--max-steps", type=int, help="Stop at this global step (schedule unchanged); "
              "re-run without it to continue.")
@click.option("--checkpoint-every", type=int, help="Save every N steps (and every "
              "--checkpoint-secs, whichever first).")
@click.option("--checkpoint-secs", type=float, help="Save every this many seconds (stretched "
              "to 50x the last save's duration, so saving big models costs at most ~2%; the "
              "TensorBoard images drawn with each save count: about 1 s on 2 cores).  "
              "[default: 120]")
@click.option("--keep", type=int, help="Keep the latest N checkpoints.  [default: 5]")
@click.option("--keep-every", type=int, help="Archive (never delete) checkpoints at multiples "
              "of N steps (0: none, which a resume may set).")
@click.option("--best-metric", help="Keep the best checkpoint by NAME[:min|max] (loss, analogy, "
              "similarity/<file name without its suffix and a compression's>; loss is "
              "minimised, evaluations maximised).  [default: loss:min]")
@click.option("--log-every", type=int, help="Steps per logging window.  [default: 100]")
@click.option("--tensorboard/--no-tensorboard", default=None, help="Write TensorBoard events "
              "(metrics.jsonl is always written).  [default: on]")
@click.option("--probe", multiple=True, help="Probe word whose neighbours are logged (repeat).")
@click.option("--no-probe", is_flag=True, help="Drop a resumed run's probe words.")
@click.option("--projector-words", type=int, help="Words in the TensorBoard projector.  "
              "[default: 2000]")
@click.option("--projector-each-checkpoint/--no-projector-each-checkpoint", default=None,
              help="Also export the projector at every checkpoint.  [default: off]")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar on a "
              "terminal (elsewhere a line a minute).  [default: on]")
@click.option("--eval-every", type=int, help="Evaluate every N steps (needs --eval-analogies "
              "and/or --eval-similarity).")
@click.option("--no-eval", is_flag=True, help="Drop a resumed run's evaluation (--eval-every "
              "and its files).")
@click.option("--eval-analogies", type=click.Path(path_type=str),
              help="questions-words file for evaluation during training.")
@click.option("--eval-similarity", type=click.Path(path_type=str), multiple=True,
              help="word-pair similarity file (repeatable).")
@click.option("--eval-restrict-vocab", type=int, help="Analogies consider the N most frequent "
              "words.  [default: 30000]")
@click.option("--init-from", help="Warm start: copy rows of shared words from this run, "
              "checkpoint or vectors file (word2vec text/binary, .npy).")
@click.option("--restart", is_flag=True, help="Start the run over; the old folder is moved "
              "aside to RUN.old-<time>, never deleted.")
@click.option("--from", "from_ckpt", help="Resume from this checkpoint (its step, its name "
              "or folder, 'best' or 'latest'); newer checkpoints are moved aside.")
@click.option("--nproc", type=int, help="Train with N processes on this machine, started as "
              "torchrun starts them; needs --micro-batches M with N dividing M. Across machines, "
              "start torchrun yourself: torchrun ... -m embedlab -- train ...")
def train(run: str | None, runs_dir: str, preset: str | None, restart: bool,
          from_ckpt: str | None, nproc: int | None, **params: Any) -> None:
    """Train word2vec; re-running the same command resumes exactly where it stopped."""
    from embedlab.cli import loading

    with loading():
        from embedlab.training import distributed
        from embedlab.training.api import train as train_run
    if nproc is not None:
        _launch(nproc, params.get("micro_batches"))
    if params.get("probe"):  # words, as neighbors takes them (UTF-8 in a C locale too)
        from embedlab.cli.query import typed_word

        params["probe"] = tuple(map(typed_word, params["probe"]))
    result = train_run(run=run, runs_dir=runs_dir, preset=preset, restart=restart,
                       from_checkpoint=from_ckpt, **params)
    if result.config.data.corpus == "demo" and result.finished \
            and distributed.launched_rank() == 0:
        _demo_report(result)


#: --nproc's limit, as --threads': processes of one machine
MAX_PROCESSES = 1024


def _launch(nproc: int, micro_batches: int | None) -> None:
    """``--nproc N``: this command again as N processes of one run; exits with their status.
    A ``--micro-batches`` they cannot split is refused before any process starts (each imports
    torch: seconds, and N of them on a small machine)."""
    from embedlab.cli import invoked_args
    from embedlab.errors import InputError, import_torch
    from embedlab.training import distributed
    from embedlab.training.launch import run_processes

    if not 1 <= nproc <= MAX_PROCESSES:  # each process imports torch: a typo would fork bomb
        raise InputError(f"--nproc must be from 1 to {MAX_PROCESSES}, got {nproc}; pass e.g. "
                         "--nproc 2")
    if distributed.launched_by_torchrun():  # its processes would wait for others forever
        raise InputError("--nproc starts the processes of a run, and this command already runs "
                         "as one of them; drop --nproc (torchrun's --nproc-per-node sets them)")
    if micro_batches is not None and micro_batches > 1:
        from embedlab.training.launch import uneven_split

        uneven = uneven_split(nproc, micro_batches)
        if uneven is not None:
            raise uneven
    if importlib.util.find_spec("torch") is None:  # said as the processes would say it; not
        import_torch("--nproc")  # imported here: the launcher stays light, its signals prompt
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(run_processes(nproc, _without_nproc(invoked_args())))


def _without_nproc(argv: list[str]) -> list[str]:
    """The command's arguments without ``--nproc N`` / ``--nproc=N``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out


def _demo_report(result: TrainResult) -> None:
    """What `make demo` shows: planted-analogy accuracy and a few neighbour lists."""
    from embedlab.data.demo import demo_probe_words, write_questions
    from embedlab.errors import InputError, warn

    vectors = result.vectors
    with tempfile.TemporaryDirectory() as tmp:
        questions = write_questions(Path(tmp) / "questions.txt")
        try:
            res = vectors.evaluate_analogies(questions)
        except InputError:
            # a vocabulary cut below the planted words (--max-vocab 50): the run trained and
            # saved, and the report is not what it asked for
            warn(f"the demo's report is left out: the vocabulary ({len(vectors):,} words) holds "
                 "none of the planted analogies' words (a small --max-vocab or a high "
                 "--min-count cut them)")
            return
    total = res.total
    echo(f"\nplanted analogies (3CosAdd): {res.accuracy:.1%} "
               f"({total.correct} correct of {total.answered} answered, {total.skipped} "
               "skipped)")
    for sec in res.sections:
        echo(f"  {sec.name:<24} {sec.accuracy:6.1%}  ({sec.correct}/{sec.answered})")
    from embedlab.data.demo import planted_analogies

    echo("\nexamples (a : b :: c : ?, best answer):")
    shown: set[str] = set()
    for section, a, b, c, d in planted_analogies():
        if section in shown or not all(w in vectors for w in (a, b, c)):
            continue
        shown.add(section)
        answer = vectors.analogy(a, b, c, k=1)[0][0]
        mark = "✓" if answer == d else f"✗ (expected {d})"
        echo(f"  {a} : {b} :: {c} : {answer}  {mark}")
    echo("\nnearest neighbours (cosine):")
    for word in demo_probe_words():
        if word in vectors:
            near = ", ".join(f"{w} {s:.2f}" for w, s in vectors.most_similar(word, k=5))
            echo(f"  {word:<10} → {near}")
    # the way this process was started (`make demo` runs .venv/bin/embedlab, which need not
    # be on PATH), so the hint can be pasted as it is
    prog = sys.argv[0] if Path(sys.argv[0]).name == "embedlab" else f"{sys.executable} -m embedlab"
    echo(f"\nnext: {prog} neighbors {result.run_dir} king   ·   "
               f"{prog} tensorboard {result.run_dir.parent}")
