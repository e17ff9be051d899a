"""The record of a grade: one frozen result per student (Gradescope's results.json form), its seal, and
who needs a human (pure functions of records)."""
