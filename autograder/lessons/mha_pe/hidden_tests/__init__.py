"""Instructor-only hidden tests. Never copied into a student release; never visible to a worker."""
