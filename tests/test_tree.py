"""Removing a folder a submission wrote to: any depth, never a link's target, never an exception."""

import os

from autograder.worker.tree import remove_tree


def test_a_nest_past_the_recursion_limit_goes_and_a_links_target_stays(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("kept")
    folder = tmp_path / "scratch"
    folder.mkdir()
    here = os.getcwd()
    os.chdir(folder)
    try:
        for _ in range(1500):  # deeper than shutil.rmtree's recursion reaches
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)
    (folder / "link").symlink_to(outside)
    remove_tree(folder)
    assert not folder.exists() and outside.read_text() == "kept"


def test_nothing_there_and_an_empty_folder_are_fine(tmp_path):
    remove_tree(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    remove_tree(tmp_path / "empty")
    assert list(tmp_path.iterdir()) == []
