"""Lets ``import mha_pe`` find the package these tests sit in.

To run the same tests on an ``mha_pe`` package somewhere else (a copy you are
experimenting with, say), set ``MHA_PE_PATH`` to the folder that contains it.
"""

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, os.environ.get("MHA_PE_PATH") or str(Path(__file__).resolve().parents[2]))


@pytest.fixture(autouse=True)
def _seeded():
    """Every test sees the same random inputs, whatever order the tests run in."""
    torch.manual_seed(0)
