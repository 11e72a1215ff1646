"""What gensim's ``Word2Vec(...)`` arguments, word2vec.c's flags and the CS20 lecture's
constants are called here.

A gensim or word2vec.c user types the names they know: ``vector_size=100``, ``sg=1``,
``workers=4``, ``-size 100 -cbow 1 -hs 1``. Those names are not embedlab's options; an unknown
option that is one of them is told, in its one-line refusal, the option that means the same
(:func:`hint`), instead of whatever name happens to be spelled alike.
"""

from __future__ import annotations

#: a foreign name (underscores) -> (embedlab's option, how values map: in Python, on the
#: command line; "" where they are the same). Where no option of train means the same (None),
#: the two texts say what does.
FOREIGN: dict[str, tuple[str | None, str, str]] = {
    # gensim's Word2Vec(...)
    "sentences": ("corpus", "a list of token lists, or a file's path", ""),
    "corpus_file": ("corpus", "", ""),
    "vector_size": ("dim", "", ""),
    "size": ("dim", "", ""),
    "sg": ("model", "sg=1 is model='skipgram', sg=0 model='cbow'",
           "-sg 1 is --model skipgram, -sg 0 --model cbow"),
    "hs": ("loss", "hs=1 is loss='hs', hs=0 the default loss='neg'; a run trains one loss, "
           "not word2vec.c's hs and negative sampling together",
           "-hs 1 is --loss hs, -hs 0 the default --loss neg; a run trains one loss, not "
           "word2vec.c's -hs 1 with -negative 5 together"),
    "workers": ("threads", "", ""),
    "alpha": ("lr", "", ""),
    "min_alpha": ("min_lr_ratio", "min_lr_ratio = min_alpha / alpha",
                  "--min-lr-ratio = min-alpha / alpha"),
    "iter": ("epochs", "", ""),
    "ns_exponent": ("noise_exponent", "", ""),
    "max_final_vocab": ("max_vocab", "", ""),
    "max_vocab_size": ("max_distinct", "the distinct words kept while counting", ""),
    "callbacks": (None, "on_progress=FUNCTION is called with each log window's Progress and "
                  "once at the end (raise in it to stop, saved); see help(embedlab.train)",
                  "the progress bar and RUN/metrics.jsonl report each log window; from Python, "
                  "embedlab.train(on_progress=FUNCTION) calls FUNCTION at each"),
    # gensim's arguments that no option means
    "shrink_windows": (None, "windows always shrink as word2vec's do (each centre draws 1 to "
                       "window=), as gensim's default shrink_windows=True", "windows always "
                       "shrink as word2vec's do (each centre draws 1 to --window)"),
    "cbow_mean": (None, "CBOW always averages its context vectors (gensim's default "
                  "cbow_mean=1)", "CBOW always averages its context vectors (gensim's default "
                  "cbow_mean=1)"),
    "batch_words": (None, "gensim's batch_words sizes a worker's job; here the threads share "
                    "each step, whose size batch_size= sets in centre words (it changes the "
                    "vectors, not only the speed)", "gensim's batch_words sizes a worker's "
                    "job; here the threads share each step, whose size --batch-size sets in "
                    "centre words (it changes the vectors, not only the speed)"),
    "compute_loss": (None, "the loss is always computed and logged (RUN/metrics.jsonl, "
                     "TensorBoard, on_progress=)", "the loss is always computed and logged "
                     "(RUN/metrics.jsonl, TensorBoard)"),
    "sorted_vocab": (None, "the vocabulary is always sorted by descending count",
                     "the vocabulary is always sorted by descending count"),
    "trim_rule": (None, "min_count=, max_vocab= and max_distinct= choose the words; filter "
                  "the sentences first for other rules", "--min-count, --max-vocab and "
                  "--max-distinct choose the words; filter the corpus first for other rules"),
    "hashfxn": (None, "initial vectors are drawn from seed=, not hashed from the words",
                "initial vectors are drawn from --seed, not hashed from the words"),
    "null_word": (None, "no padding word is added", "no padding word is added"),
    "comment": (None, "the run folder's name and config.json record the run",
                "the run folder's name and config.json record the run"),
    # word2vec.c's flags (-train FILE -size N -cbow 0|1 -hs 0|1 ...)
    "train": ("corpus", "", ""),
    "cbow": ("model", "cbow=1 is model='cbow', cbow=0 model='skipgram', embedlab's default "
             "where word2vec.c's is CBOW; word2vec.c's CBOW starts at alpha 0.05, embedlab's lr "
             "at 0.025 for both",
             "-cbow 1 is --model cbow, -cbow 0 --model skipgram, embedlab's default where "
             "word2vec.c's is -cbow 1; word2vec.c's CBOW starts at -alpha 0.05, embedlab's --lr "
             "at 0.025 for both"),
    # word2vec.c's flags for which embedlab has a way, not an option of train
    "output": (None, "the vectors stay in the run folder run=, and "
               "embedlab.load(run).save_word2vec_format(path, binary=True) writes a file",
               "the vectors stay in the run folder --run RUN, and 'embedlab export RUN --out "
               "vectors.bin' writes a file"),
    "binary": (None, "the file's name picks it: save_word2vec_format(path, binary=True) or "
               "embedlab export RUN --out vectors.bin",
               "the --out name of 'embedlab export RUN' picks it: vectors.bin is binary, "
               "vectors.txt text"),
    "save_vocab": (None, "every run writes its vocabulary to RUN/vocab.tsv (word, tab, count)",
                   "every run writes its vocabulary to RUN/vocab.tsv (word, tab, count)"),
    "read_vocab": (None, "prepare the corpus once (embedlab prepare CORPUS --out DIR) and pass "
                   "corpus=DIR: its vocabulary is reused for that corpus (one corpus's "
                   "vocabulary applied to another is not offered)", "prepare the corpus once "
                   "('embedlab prepare CORPUS --out DIR') and pass --corpus DIR: its vocabulary "
                   "is reused for that corpus (one corpus's vocabulary applied to another is not "
                   "offered)"),
    "debug": (None, "progress is shown by default, and progress=False hides it",
              "progress is shown by default, and --no-progress hides it"),
    "classes": (None, "word classes (k-means) are not offered: cluster the exported vectors",
                "word classes (k-means) are not offered: cluster the exported vectors"),
    # the Stanford CS20 lecture's constants (word2vec.py: VOCAB_SIZE, EMBED_SIZE, ...)
    "vocab_size": ("max_vocab", "with unk='UNK' the other words become UNK, as in the "
                   "lecture; preset='cs20' sets both", "with --unk UNK the other words become "
                   "UNK, as in the lecture; --preset cs20 sets both"),
    "embed_size": ("dim", "", ""),
    "num_sampled": ("negative", "noise words per (centre, context) pair", "noise words per "
                    "(centre, context) pair"),
    "skip_window": ("window", "", ""),
    "learning_rate": ("lr", "", ""),
    "num_train_steps": ("max_steps", "", ""),
    "skip_step": ("log_every", "the steps between loss reports", "the steps between loss "
                  "reports"),
    # word2vec.c's flags with our names, typed with one dash
    **{name: (name, "", "") for name in ("window", "negative", "sample", "threads", "min_count",
                                         "seed")},
}


def hint(name: str, *, python: bool) -> str | None:
    """The option that ``name`` (a gensim argument or a word2vec.c flag, dashes allowed) means
    here, as a Python argument or a flag, with how its values map; None for another name.
    For a name no option means (``-output``), what to do instead, starting "no option: "."""
    found = FOREIGN.get(name.lstrip("-").replace("-", "_"))
    if found is None:
        return None
    option, in_python, on_line = found
    values = in_python if python else on_line
    if option is None:
        return f"no option: {values}"
    spelled = f"{option}=" if python else f"--{option.replace('_', '-')}"
    return f"{spelled} ({values})" if values else spelled

