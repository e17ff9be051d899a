"""The commands: each a plain function the CLI wraps (grade, validate, release, classroom, gradescope, merge,
final-gradebook, similarity, demo, bench, new-lesson). The top layer: nothing imports it but the CLI."""
