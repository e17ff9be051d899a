"""Command-line wrapper: parse arguments, call the command's plain function, turn KitError into one line.

Every command is an ordinary function elsewhere in the package; this module only
wires arguments to it, so tests call the functions directly.
"""

import argparse
import sys

from . import paths
from .errors import KitError


def _release(args):
    from .release import release

    ok, lines = release(paths.SOLUTIONS_DIR, paths.ASSIGNMENTS_DIR, paths.ASSIGNMENT_ID, check=args.check)
    for line in lines:
        print(line)
    return 0 if ok else 1


def _bench(args):
    from .bench import run_bench

    run_bench(repeats=args.repeats, class_size=args.class_size, notebooks=args.notebooks)
    return 0


def _demo(args):
    from .demo import run_demo

    return run_demo(args.out, sandbox_mode=args.sandbox)


def _grade(args):
    from .grading import grade_class

    grade_class(args.class_dir, args.out, jobs=args.jobs, sandbox_mode=args.sandbox, resume=args.resume,
                fork=not args.no_fork, skip_notebook=args.skip_notebook)
    return 0


def _judge(args):
    from .grading import judge_main

    return judge_main(args.manifest)


def _validate(args):
    from .validate import validate

    return 0 if validate(sandbox_mode=args.sandbox, jobs=args.jobs) else 1


def _gradebook(args):
    from .final_gradebook import export_gradebook

    print(f"final gradebook: {export_gradebook(args.out_dir)}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rel = commands.add_parser("release", help="regenerate assignments/ from solutions/")
    rel.add_argument("--check", action="store_true", help="only verify that assignments/ is up to date")
    rel.set_defaults(run=_release)

    bench = commands.add_parser("bench", help="print speed ratios measured side by side")
    bench.add_argument("--repeats", type=int, default=5, help="timed repetitions per measurement (default 5)")
    bench.add_argument("--class-size", type=int, default=32, help="synthetic class size for grading (0: skip)")
    bench.add_argument("--notebooks", type=int, default=4, help="notebooks for the notebook stage (0: skip)")
    bench.set_defaults(run=_bench)

    grade = commands.add_parser("grade", help="grade every student folder of a class in the sandbox")
    grade.add_argument("class_dir", metavar="CLASS_DIR", help="one folder per student; the folder name is the id")
    grade.add_argument("--out", required=True, metavar="OUT_DIR", help="where results and reports go")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    grade.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "none"),
                       help="auto: bwrap when it works, else none with a loud warning (default auto)")
    grade.add_argument("--resume", action="store_true", help="skip students whose submission and grader are unchanged")
    grade.add_argument("--skip-notebook", action="store_true", help="grade the code only, not the notebook")
    grade.add_argument("--no-fork", action="store_true",
                       help="start every worker in a sandbox of its own instead of forking it from a warm one "
                            "(slower; automatic where the kernel forbids nested namespaces)")
    grade.set_defaults(run=_grade)

    judge = commands.add_parser("_judge")  # internal: one judge process of 'grade --jobs N'
    judge.add_argument("manifest")
    judge.set_defaults(run=_judge)

    book = commands.add_parser("gradebook", help="export code + notebook (after formgrader) as one gradebook")
    book.add_argument("out_dir", metavar="OUT_DIR", help="the --out folder of a grade run")
    book.set_defaults(run=_gradebook)

    val = commands.add_parser("validate", help="grade the reference (full marks) and the stubs (zero)")
    val.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "none"))
    val.add_argument("--jobs", type=int, default=2)
    val.set_defaults(run=_validate)

    demo = commands.add_parser("demo", help="run the kit's main job on the bundled material")
    demo.add_argument("--out", default="build/demo", help="output folder (default build/demo)")
    demo.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "none"))
    demo.set_defaults(run=_demo)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KitError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
