"""Intake: a student's folder read safely into bytes, names made from ids, and the static scans of the source
(forbidden APIs, imports). Below everything that runs code."""
