"""word2vec models (torch engine and native kernel)."""

#: Bumped whenever the arithmetic of a training step changes, so that a run resumed by another
#: revision says its result will differ from an uninterrupted run (recorded in ``RUN/env.json``).
#: 1: Gauss–Newton damping, κ = 8 at batch 2048, S = K·(window+1) shared noise words.
#: 2: damping by |∂L/∂s|, κ = 16 at batch 2048, S = ⌈4/3·K·(window+1)⌉.
#: 3: the native kernel sums each noise score over d in ascending order (no horizontal sums):
#:    same mathematics, different float32 rounding.
#: 4: CBOW's word2vec update, NCE damping without the bias on input rows, lr where a batch starts.
#: 5: negative sampling skips a noise word equal to the positive's target (word2vec's rule).
STEP_REVISION = 5
STEP_CHANGES = {2: "damping by |dL/ds| instead of Gauss-Newton, kappa 16, 40 shared noise words",
                3: "native noise scores summed in another order (float32 rounding differs)",
                4: "CBOW passes each context word the whole hidden gradient (word2vec's rule); "
                   "NCE damping no longer adds the bias term to input rows; each step's "
                   "learning rate is the schedule's value where the batch starts",
                5: "negative sampling skips a shared noise word that equals the target of a "
                   "positive pair, as word2vec.c and gensim skip such a draw"}
