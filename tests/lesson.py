"""The kit's own lesson as the tests use it: its descriptor and the places it names (never typed twice)."""

from autograder.lesson.assignment import default

LESSON = default()
CONTRACT = LESSON.contract
MODULES = CONTRACT.modules
SOLUTIONS = LESSON.solutions  # the reference package
RELEASE = LESSON.release  # the released student package
CATALOGUE = LESSON.catalogue
NOTEBOOK = LESSON.notebook
