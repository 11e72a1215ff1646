"""Training word2vec: set-up, the loop, and the state a checkpoint keeps.

``embedlab.train(...)`` (:func:`embedlab.training.api.train`) is ``embedlab train`` in Python.
Importing this package imports nothing else.
"""
