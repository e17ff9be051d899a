# This repository is an nbgrader course: the source notebook lives in solutions/mha_pe/ and its student
# version in assignments/mha_pe/. Generate the release with `python -m autograder release` (it runs
# nbgrader's generate_assignment and writes only the notebook, never the solution .py files).
# Grading happens in OUT_DIR/nbgrader, a course folder that `python -m autograder grade` writes.
c = get_config()
c.CourseDirectory.course_id = "mha_pe"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "assignments"
# nbgrader copies every other file of the source folder into the release unless ignored: never the solution
# modules (assignments/ gets their stubs from `python -m autograder release`) nor the public tests.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py", "tests"]
c.OverwriteCells.add_missing_cells = True  # a deleted grade cell is restored and graded
c.Execute.timeout = 60
