"""Sandboxes and workers, judge side: isolation modes, starting workers (``worker/`` is what runs inside
them), CPU shares, placement and clocks."""
