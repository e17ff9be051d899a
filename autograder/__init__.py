"""The grading engine of the Multi-Head Attention and Positional Encoding kit (``python -m autograder``)."""

__version__ = "0.1.0"
