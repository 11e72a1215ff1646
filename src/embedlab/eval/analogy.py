"""Word analogies in the questions-words format, evaluated exactly like gensim 4.

File format: ``: section name`` lines start sections; every other line is ``a b c d``
("a is to b as c is to d"). Lines without four words are skipped (counted as ``invalid``).

Semantics (gensim's ``evaluate_word_analogies(restrict_vocab=N, case_insensitive=True)``):

* only the first ``N`` words of the vocabulary are considered (vocabulary order = frequency
  order), both for the question words and for the answers;
* matching is case-insensitive via ``str.upper``; when several words share an upper-case form,
  the first (most frequent) one stands for all of them;
* a question with any word outside those ``N`` is skipped and counted as ``skipped``;
* the prediction is the best-scoring word among the first ``N``, excluding the three question
  words; like gensim we look at the top 5 of those and take the first that is not a case
  variant of a question word (if all 5 are, the 5th counts). Equal scores rank the lower row
  (the more frequent word) first; gensim leaves their order to an unstable sort;
* accuracy = correct / answered (0 when nothing was answered; the table shows ``n/a``); the total
  is over all sections, and the semantic and syntactic sums (sections named ``gram...``) are
  added where a file has both, as word2vec.c's compute-accuracy prints them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embedlab.errors import InputError, counted, spell
from embedlab.eval.scoring import Method, cosmul, safe, top_k, unit_rows
from embedlab.fsutil import clip, read_utf8, text_lines

_TOP = 5  # gensim inspects this many candidates per question
_SCORE_BUDGET = 1 << 25  # floats per batch of scores (128 MiB): bounds memory for big vocabularies
_MAX_BATCH = 1024  # questions per GEMM
_BUFFERS: dict[Method, int] = {"3cosadd": 1, "3cosmul": 3}  # B×n score arrays per batch


@dataclass(frozen=True)
class QuestionSet:
    """Parsed questions. ``words`` is Q×4 (a, b, c, d) upper-cased; ``section`` is Q section ids."""

    sections: tuple[str, ...]
    words: tuple[tuple[str, str, str, str], ...]
    section: np.ndarray
    invalid_lines: int
    source: str

    def __len__(self) -> int:
        return len(self.words)


@dataclass(frozen=True)
class SectionScore:
    """Counts for one section (or the total). ``answered`` excludes skipped (OOV) questions."""

    name: str
    correct: int
    answered: int
    skipped: int

    @property
    def accuracy(self) -> float:
        """Correct over answered, in [0, 1]; 0 when nothing was answered."""
        return self.correct / self.answered if self.answered else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: ``section``, ``accuracy``, ``correct``, ``answered``, ``skipped``."""
        return {"section": self.name, "accuracy": self.accuracy, "correct": self.correct,
                "answered": self.answered, "skipped": self.skipped}


@dataclass(frozen=True)
class AnalogyResult:
    """An analogy evaluation (``Vectors.evaluate_analogies``, ``embedlab eval``): the scores per
    section of the file and in total, the ``method`` (``"3cosadd"`` or ``"3cosmul"``), the
    ``restrict_vocab`` its candidates came from, the file's ``invalid_lines`` and its path
    (``source``)."""

    method: Method
    restrict_vocab: int
    sections: tuple[SectionScore, ...]
    total: SectionScore
    invalid_lines: int
    source: str

    @property
    def accuracy(self) -> float:
        """Total accuracy in [0, 1] over answered questions."""
        return self.total.accuracy

    def kinds(self) -> tuple[SectionScore, ...]:
        """The semantic and the syntactic questions' sums, as word2vec.c's compute-accuracy
        prints them, where the file has both: questions-words.txt names its syntactic
        sections ``gram1-...`` to ``gram9-...``. Empty for a file without both kinds."""
        syntactic = [s for s in self.sections if s.name.lower().startswith("gram")]
        semantic = [s for s in self.sections if not s.name.lower().startswith("gram")]
        if not syntactic or not semantic:
            return ()
        return tuple(SectionScore(name, sum(s.correct for s in group),
                                  sum(s.answered for s in group), sum(s.skipped for s in group))
                     for name, group in (("semantic", semantic), ("syntactic", syntactic)))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (``embedlab eval --json``): the file, method, accuracy, total, sections,
        and the semantic/syntactic sums where the file has both."""
        out = {"file": self.source, "method": self.method, "restrict_vocab": self.restrict_vocab,
               "accuracy": self.accuracy, "total": self.total.to_dict(),
               "sections": [s.to_dict() for s in self.sections],
               "invalid_lines": self.invalid_lines}
        out.update({k.name: k.to_dict() for k in self.kinds()})
        return out


#: where word2vec's own questions-words file (19,544 questions) can be downloaded
QUESTIONS_WORDS_URL = ("https://raw.githubusercontent.com/tmikolov/word2vec/master/"
                       "questions-words.txt")


def looked_for(path: Path) -> str:
    """Where a missing file was looked for, when the path typed was relative: the start of the
    fix in its message, since a relative path is easily meant from another folder."""
    return "" if path.is_absolute() else f"looked for {os.path.abspath(path)}; "


def read_questions(path: str | os.PathLike[str]) -> QuestionSet:
    """Parse a questions-words file; raises :class:`InputError` for a missing or malformed file."""
    p = Path(path)
    text = read_utf8(p, what="analogy file",
                     missing_fix=f"{looked_for(p)}download word2vec's questions-words.txt "
                     f"({QUESTIONS_WORDS_URL}) or pass the path of an existing questions-words "
                     "file",
                     unreadable_fix="pass a UTF-8 questions-words file")
    return parse_questions(text_lines(text), str(p))


def no_section_yet(source: str, n: int, line: str) -> InputError:
    """The refusal of line ``n``, a question (or a section line without its space) before the
    first ': section' line."""
    if line.startswith(":"):
        return InputError(f"{source}:{n}: {clip(line.strip())!r} is no section line, which is "
                          "': ' and a name; write it like ': capital-common-countries'")
    return InputError(f"{source}:{n}: question before the first ': section' line; "
                      "start the file with a line like ': capital-common-countries'")


def parse_questions(lines: Sequence[str], source: str = "<questions>") -> QuestionSet:
    sections: list[str] = []
    words: list[tuple[str, str, str, str]] = []
    section: list[int] = []
    invalid = 0
    for n, line in enumerate(lines, 1):
        if line.startswith(": "):
            sections.append(line.lstrip(": ").strip())
            continue
        parts = line.upper().split()
        if not parts:
            continue
        if not sections:
            raise no_section_yet(source, n, line)
        if len(parts) != 4:
            invalid += 1
            continue
        words.append((parts[0], parts[1], parts[2], parts[3]))
        section.append(len(sections) - 1)
    if not words:
        raise InputError(f"{source} holds no analogy questions; expected ': section' lines "
                         "followed by 'a b c d' lines (questions-words format)")
    return QuestionSet(tuple(sections), tuple(words), np.asarray(section, dtype=np.int64),
                       invalid, source)


def case_groups(words: Sequence[str], n: int) -> tuple[dict[str, int], np.ndarray]:
    """Among the first ``n`` words: upper-case form -> its first row; and each row's group
    (the first row with the same upper-case form)."""
    lookup: dict[str, int] = {}
    group = np.empty(min(n, len(words)), dtype=np.int64)
    for i in range(len(group)):
        group[i] = lookup.setdefault(words[i].upper(), i)
    return lookup, group


def question_ids(words: Sequence[str], questions: QuestionSet, restrict_vocab: int = 30_000,
                 flag: str = "--restrict-vocab") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row ids (Q×4, -1 = unknown), which questions are fully known, and the case groups.

    Needs only the vocabulary, not vectors, so a trainer can call it before training (see
    :meth:`embedlab.eval.Evaluator.check`). Raises :class:`InputError` if no question is known.
    ``flag``: the option that set ``restrict_vocab`` (train's is ``--eval-restrict-vocab``).
    """
    if restrict_vocab < 1:
        raise InputError(f"{spell(flag)} must be >= 1, got {restrict_vocab}; "
                         f"e.g. {spell(flag, 30000)}")
    n = min(restrict_vocab, len(words))
    lookup, group = case_groups(words, n)
    ids = np.array([[lookup.get(w, -1) for w in q] for q in questions.words], dtype=np.int64)
    known: np.ndarray = np.all(ids >= 0, axis=1)
    if not known.any():
        every = "the 1 question" if len(questions) == 1 else f"all {len(questions)} questions"
        use = "uses" if len(questions) == 1 else "use"
        if n == len(words):  # already the whole vocabulary: a larger limit changes nothing
            raise InputError(f"{every} in {questions.source} {use} words "
                             f"outside the vocabulary ({counted(n, 'word')}); check the file's "
                             "language/case, or train on a corpus that holds its words")
        raise InputError(f"{every} in {questions.source} {use} words outside "
                         f"the first {n} words of the vocabulary; check the file's language/case "
                         f"or raise {spell(flag)}")
    return ids, known, group


def evaluate_analogies(words: Sequence[str], matrix: np.ndarray, norms: np.ndarray,
                       questions: QuestionSet, *, restrict_vocab: int = 30_000,
                       method: Method = "3cosadd",
                       flag: str = "--restrict-vocab") -> AnalogyResult:
    """Score ``questions`` against the first ``restrict_vocab`` rows (see the module docstring).

    Raises :class:`InputError` if no question can be answered (all out of vocabulary).
    ``matrix`` (V×D) and ``norms`` (V) are only read.
    """
    n = min(restrict_vocab, len(words))
    ids, known, group = question_ids(words, questions, restrict_vocab, flag)
    hit = np.zeros(len(ids), dtype=bool)
    hit[known] = _solve(matrix, norms, ids[known], group, n, method)
    return _tally(questions, known, hit, method, restrict_vocab)


def _solve(matrix: np.ndarray, norms: np.ndarray, ids: np.ndarray, group: np.ndarray, n: int,
           method: Method) -> np.ndarray:
    """Correctness flags (Q) for in-vocabulary questions (Q×4 row ids, which are group ids).

    Fast path: mask the question words *and all their case variants*, then argmax (on equal
    scores the lowest row wins). That equals gensim's "first of the top 5 that is not a
    variant" whenever fewer than 5 other variants exist; the rare questions with more (or tiny
    vocabularies) take gensim's exact path.
    """
    variants = _variant_rows(group)
    batch = max(1, min(_MAX_BATCH, _SCORE_BUDGET // max(n, 1)))
    # Unit-normalised candidates, once: then one GEMM per batch yields cosines directly.
    units = np.ascontiguousarray(matrix[:n] / safe(norms[:n])[:, None], dtype=np.float32)
    # Reused across batches: fresh B×n arrays cost page faults (3CosMul needs three).
    bufs = np.empty((_BUFFERS[method], min(batch, len(ids)), n), dtype=np.float32)
    out = np.zeros(len(ids), dtype=bool)
    for start in range(0, len(ids), batch):
        q = ids[start:start + batch]
        scores = _batch_scores(matrix, norms, units, q, method, bufs[:, :len(q)])
        out[start:start + len(q)] = _judge(scores, q, group, variants)
    return out


def _judge(scores: np.ndarray, q: np.ndarray, group: np.ndarray,
           variants: dict[int, list[int]]) -> np.ndarray:
    """Correctness flags (B) of a batch's questions ``q`` (B×4) from their scores (B×n, which
    this overwrites with the masks)."""
    n = scores.shape[1]
    scores[np.arange(len(q))[:, None], q[:, :3]] = -np.inf  # never answer with a question word
    extra = [_extra_variants(row, variants) for row in q[:, :3].tolist()]
    hard = np.array([len(e) >= _TOP or n - 3 < _TOP for e in extra], dtype=bool)
    out = np.zeros(len(q), dtype=bool)
    if hard.any():
        top = scores[hard]
        cand = np.stack([top_k(row, min(_TOP, n)) for row in top])
        out[hard] = _pick(np.take_along_axis(top, cand, axis=1), cand, group, q[hard])
    rows = [i for i, e in enumerate(extra) for _ in e]
    if rows:
        scores[rows, [c for e in extra for c in e]] = -np.inf
    best = scores.argmax(axis=1)  # over all rows: selecting the easy ones first copies B×n
    easy = ~hard
    out[easy] = (group[best] == q[:, 3])[easy]
    return out


def _batch_scores(matrix: np.ndarray, norms: np.ndarray, units: np.ndarray, q: np.ndarray,
                  method: Method, bufs: np.ndarray) -> np.ndarray:
    """B×n candidate scores for a batch of questions (rows of ``q``: a, b, c, ...), written
    into ``bufs`` (k×B×n float32, k = ``_BUFFERS[method]``)."""
    ua, ub, uc = (unit_rows(matrix, norms, q[:, j]) for j in range(3))
    if method == "3cosadd":
        query = ub + uc - ua  # gensim: unit(mean of unit b, unit c, -unit a)
        query /= np.maximum(np.linalg.norm(query, axis=1, keepdims=True), np.float32(1e-30))
        return np.matmul(query, units.T, out=bufs[0])
    cos = [np.matmul(u, units.T, out=buf) for u, buf in zip((ua, ub, uc), bufs, strict=True)]
    return cosmul(*cos)


def _variant_rows(group: np.ndarray) -> dict[int, list[int]]:
    """group id -> all rows in that group, for groups with more than one row (case variants)."""
    sizes = np.bincount(group, minlength=len(group))
    shared = np.flatnonzero(sizes[group] > 1)
    members: dict[int, list[int]] = {}
    for row in shared.tolist():
        members.setdefault(int(group[row]), []).append(row)
    return members


def _extra_variants(question_rows: list[int], variants: dict[int, list[int]]) -> list[int]:
    """Rows that are case variants of the question words, other than the words' own rows."""
    if not variants:
        return []
    own = set(question_rows)
    return sorted({r for g in own for r in variants.get(g, ()) if r not in own})


def _pick(values: np.ndarray, cand: np.ndarray, group: np.ndarray, q: np.ndarray) -> np.ndarray:
    """gensim's exact choice among the top candidates (B×k, best first); returns B correctness
    flags."""
    valid = values > -np.inf  # fewer than _TOP candidates exist in tiny vocabularies
    cg = group[cand]  # B×k group ids of the candidates
    variant = (cg[:, :, None] == q[:, None, :3]).any(axis=2)
    good = valid & ~variant
    first_good = np.where(good.any(axis=1), good.argmax(axis=1),
                          valid.sum(axis=1) - 1)  # else the last candidate seen
    chosen = np.take_along_axis(cg, np.maximum(first_good, 0)[:, None], axis=1)[:, 0]
    return valid.any(axis=1) & (chosen == q[:, 3])


def _tally(questions: QuestionSet, known: np.ndarray, hit: np.ndarray, method: Method,
           restrict_vocab: int) -> AnalogyResult:
    sec = questions.section
    n_sec = len(questions.sections)
    correct = np.bincount(sec, weights=hit, minlength=n_sec).astype(int)
    answered = np.bincount(sec, weights=known, minlength=n_sec).astype(int)
    total_q = np.bincount(sec, minlength=n_sec)
    sections = tuple(
        SectionScore(name, int(correct[i]), int(answered[i]), int(total_q[i] - answered[i]))
        for i, name in enumerate(questions.sections))
    total = SectionScore("Total accuracy", int(correct.sum()), int(answered.sum()),
                         int(total_q.sum() - answered.sum()))
    return AnalogyResult(method, restrict_vocab, sections, total, questions.invalid_lines,
                         questions.source)
