"""An auto-graded assignment kit's engine (``python -m autograder``): release, grade, report; lessons are data
(``autograder/lessons/``)."""
