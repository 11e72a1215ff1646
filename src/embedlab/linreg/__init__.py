"""Linear regression on a two-column table (the lecture's first example): a second model on
the same experiment core. ``config`` is torch-free; ``train`` needs torch."""
