"""The code that runs inside the sandbox, next to one student's submission.

Only this folder of the engine is visible to the worker process (read-only):
it must import nothing from the rest of ``autograder``. The judge talks to it
through :mod:`.protocol`, which carries data only (JSON and raw tensor bytes).
"""
