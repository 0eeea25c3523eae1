"""The Spark adapters, the lowest floor: every other package may import them, they import nothing of ours.

``compat`` is the one place that touches PySpark internals, ``checkpoints`` gives a session a
checkpoint directory it can remove, ``graphframes`` imports the GraphFrames Python package.
"""
