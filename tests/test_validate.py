"""``python -m autograder validate``: known submissions through the grade path; its report is printed."""

from autograder.validate import validate


def test_validate_passes_and_prints_the_report(capsys):
    lines = []
    ok = validate(jobs=2, emit=lines.append)
    with capsys.disabled():  # the mutation score is part of every `make test` run's output
        print("\n\n" + "\n".join(lines[-6:]))
    report = "\n".join(lines)
    assert "reference" in report and "stubs" in report and "mutation score" in report
    assert ok, "\n".join(line for line in lines if "WRONG" in line)
    assert "(100%)" in report
