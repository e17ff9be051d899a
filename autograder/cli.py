"""Command-line wrapper: parse arguments, call the command's plain function, turn KitError into one line.

Every command is an ordinary function elsewhere in the package; this module only
wires arguments to it, so tests call the functions directly.
"""

import argparse
import sys

from .lesson.assignment import resolve
from .errors import KitError
from .sandbox.isolation import MODES

UNISOLATED_HELP = ("accept records graded with --sandbox none (trusted code only); a record whose seal fails is "
                   "refused all the same")


def _classroom(args):
    from .commands.classroom import write_template

    files = write_template(args.to, resolve(args.assignment))
    print(f"template repository with {len(files)} files written to {args.to}")
    return 0


def _new_lesson(args):
    from .commands.new_lesson import scaffold

    written = scaffold(args.id, args.to)
    print(f"lesson {args.id} written to {args.to} ({len(written)} files); next: python -m autograder release "
          f"--assignment {args.to}")
    return 0


def _release(args):
    from .commands.release import release

    if args.to:  # the template's first home, still accepted: 'classroom --to DIR' names what it makes
        return _classroom(args)
    ok, lines = release(resolve(args.assignment), check=args.check)
    for line in lines:
        print(line)
    return 0 if ok else 1


def _bench(args):
    from .commands.bench import run_bench

    run_bench(resolve(args.assignment), repeats=args.repeats, class_size=args.class_size, notebooks=args.notebooks)
    return 0


def _demo(args):
    from .commands.demo import run_demo

    return run_demo(args.out, sandbox_mode=args.sandbox, assignment=resolve(args.assignment), jobs=args.jobs)


def _deadlines(options):
    """The grade run's Deadlines from its hand-in options (None without a deadline; KitError for late options
    alone)."""
    from .intake.deadlines import Deadlines, LatePolicy, load_extensions, parse_time

    policy = LatePolicy(per_day=options["late_penalty"], cap=options["late_cap"], grace_minutes=options["grace"],
                        until_days=options["late_days"])
    if options["deadline"] is None:
        if options["extensions"] or policy != LatePolicy():
            raise KitError("--extensions and the late policy need --deadline")
        return None
    deadline = parse_time(options["deadline"])
    extensions = load_extensions(options["extensions"], deadline) if options["extensions"] else {}
    return Deadlines(deadline, extensions, policy)


def _grade(args):
    from .commands.grading import grade_class
    from .commands.handins import DEFAULTS, remember, remembered
    from .commands.planning import parse_shard
    from .intake.roster import load_roster

    shard = parse_shard(args.shard) if args.shard else None
    resume = args.resume or bool(args.regrade)
    options = remembered(args.out, {name: getattr(args, name) for name in DEFAULTS}, resume)
    grade_class(args.class_dir, args.out, jobs=args.jobs, sandbox_mode=args.sandbox, resume=resume,
                fork=not args.no_fork, skip_notebook=args.skip_notebook, shard=shard, shard_by=args.shard_by,
                assignment=resolve(args.assignment), regrade=args.regrade, deadlines=_deadlines(options),
                roster=load_roster(options["roster"]) if options["roster"] else None)
    remember(args.out, options)
    return 0


def _judge(args):
    from .commands.judge_pool import judge_main

    return judge_main(args.manifest)


def _validate(args):
    from .commands.validate import validate

    return 0 if validate(sandbox_mode=args.sandbox, jobs=args.jobs, require_cuda=args.require_cuda,
                         assignment=resolve(args.assignment)) else 1


def _modes(args):
    from .commands.modes import check_modes

    return 0 if check_modes(resolve(args.assignment)) else 1


def _gradescope(args):
    from .commands.gradescope import build_package

    print(f"Gradescope autograder written to {build_package(args.to, resolve(args.assignment))}")
    return 0


def _gradescope_run(args):
    from .commands.gradescope import run

    run(args.root, sandbox_mode=args.sandbox, assignment=args.assignment)  # resolved inside: a failure is written
    return 0


def _rubric(args):
    from .reports.rubric_page import write_rubric

    assignment = resolve(args.assignment)
    print(f"rubric written to {write_rubric(args.to or assignment.pages / 'rubric.md', assignment)}")
    return 0


def _figures(args):
    from .reports.figures import lesson_figures

    assignment = resolve(args.assignment)
    for path in lesson_figures(assignment, args.to or assignment.pages / "figures"):
        print(f"wrote {path}")
    return 0


def _merge(args):
    from .commands.merge import merge

    merge(args.shards, args.out, assignment=resolve(args.assignment), allow_unisolated=args.allow_unisolated)
    return 0


def _similarity(args):
    from .commands.similarity import similarity

    similarity(args.out_dir, args.class_dir, assignment=resolve(args.assignment), top=args.top,
               max_share=args.max_share, extra=args.boilerplate, shard=args.shard, merge=args.merge)
    return 0


def _final_gradebook(args):
    from .commands.final_gradebook import export_final_gradebook

    export_final_gradebook(args.out_dir, emit=print, assignment=resolve(args.assignment),
                           allow_unisolated=args.allow_unisolated)
    return 0


def _return_feedback(args):
    from .commands.return_feedback import return_feedback

    return_feedback(args.out_dir, args.class_dir, branch=args.branch, dry_run=args.dry_run, emit=print,
                    assignment=resolve(args.assignment), allow_unisolated=args.allow_unisolated)
    return 0


def _export(args):
    from .commands.export import export

    export(args.out_dir, args.to, fmt=args.format, column=args.column, allow_pending=args.allow_pending,
           allow_unisolated=args.allow_unisolated, emit=print, assignment=resolve(args.assignment))
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m autograder", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="An auto-graded assignment kit: release, grade, report. Each command works on one assignment:\n"
                    "the kit's own lesson (autograder/lessons/), or the one --assignment names.",
        epilog="a term, in order (docs/instructor-guide.md):\n"
               "  classroom --to DIR          the students' GitHub Classroom template repository\n"
               "  gradescope --to ZIP         the Gradescope autograder\n"
               "  grade CLASS_DIR --out OUT   grade a class (then formgrader for the written answers)\n"
               "  similarity OUT --class CLASS_DIR   which submissions are alike: a place to look\n"
               "  final-gradebook OUT         fold the manual grades in, rewrite reports and feedback\n"
               "  return-feedback OUT --class CLASS_DIR   each student's feedback to a branch of their repository\n"
               "  export OUT --to FILE.csv    the grades of record for an LMS (Canvas's import)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lesson = argparse.ArgumentParser(add_help=False)
    lesson.add_argument("--assignment", metavar="DESCRIPTOR",
                        help="an assignment.toml (or its folder); default: the kit's own lesson")

    new = commands.add_parser("new-lesson", help="write a working skeleton lesson to grow (docs/authoring.md)")
    new.add_argument("id", metavar="ID", help="the package students will write (a lower-case Python name)")
    new.add_argument("--to", required=True, metavar="DIR", help="a new or empty folder")
    new.set_defaults(run=_new_lesson)

    rel = commands.add_parser("release", parents=[lesson], help="regenerate assignments/ from solutions/")
    rel.add_argument("--check", action="store_true", help="only verify that assignments/ is up to date")
    rel.add_argument("--to", metavar="DIR", help="the same as 'classroom --to DIR' (its first name)")
    rel.set_defaults(run=_release)

    room = commands.add_parser("classroom", parents=[lesson],
                               help="write the students' GitHub Classroom template repository (their starting point)")
    room.add_argument("--to", required=True, metavar="DIR", help="a new or empty folder")
    room.set_defaults(run=_classroom)

    bench = commands.add_parser("bench", parents=[lesson], help="print speed ratios measured side by side")
    bench.add_argument("--repeats", type=int, default=5, help="timed repetitions per measurement (default 5)")
    bench.add_argument("--class-size", type=int, default=100, help="synthetic class size for grading (0: skip)")
    bench.add_argument("--notebooks", type=int, default=40, help="size of the class graded with its notebooks, beside nbgrader's autograde (0: skip)")
    bench.set_defaults(run=_bench)

    grade = commands.add_parser("grade", parents=[lesson], help="grade every student folder of a class in the sandbox")
    grade.add_argument("class_dir", metavar="CLASS_DIR", help="one folder per student; the folder name is the id")
    grade.add_argument("--out", required=True, metavar="OUT_DIR", help="where results and reports go")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    grade.add_argument("--sandbox", default="auto", choices=MODES,
                       help="auto: the strongest that works (bwrap, then uid: confined without namespaces, as "
                            "root), else nothing is graded and the error says why; isolated: the same; none: "
                            "no isolation, for trusted code only (default auto)")
    grade.add_argument("--resume", action="store_true", help="skip students whose submission and grader are unchanged")
    grade.add_argument("--skip-notebook", action="store_true", help="grade the code only, not the notebook")
    grade.add_argument("--shard", metavar="I/N", help="grade only shard I of N (a share of the class)")
    grade.add_argument("--shard-by", default="index", choices=("index", "hash"),
                       help="index: every N-th student of the sorted class (even shards; every shard must see the "
                            "same class folder); hash: by a hash of the id (stable as the class grows)")
    grade.add_argument("--roster", metavar="CSV", help="GitHub Classroom's roster export, or a CSV of ids: every "
                       "student listed (no folder: graded 0, 'no submission'), folders matched to them")
    grade.add_argument("--deadline", metavar="TIME", help="grade each git clone's last commit at or before this "
                       "ISO 8601 time with its zone (2026-12-01T23:59:00+00:00); later commits are named, not graded")
    grade.add_argument("--extensions", metavar="CSV", help="per-student deadlines: columns student and deadline "
                       "(an ISO time) or days (added to --deadline)")
    grade.add_argument("--late-days", type=float, default=0.0, metavar="DAYS",
                       help="late work taken this many days after a student's deadline (default 0: none)")
    grade.add_argument("--late-penalty", type=float, default=0.0, metavar="PERCENT",
                       help="percent of the maximum taken off per day or part of a day late (default 0)")
    grade.add_argument("--late-cap", type=float, default=100.0, metavar="PERCENT",
                       help="the most a late hand-in loses, in percent of the maximum (default 100)")
    grade.add_argument("--grace", type=float, default=0.0, metavar="MINUTES",
                       help="minutes after the deadline still counted on time (default 0)")
    grade.add_argument("--regrade", action="append", default=[], metavar="ID",
                       help="grade this student again (repeatable); everyone else's record is kept as --resume keeps "
                            "it, and the class's reports are rewritten")
    grade.add_argument("--no-fork", action="store_true",
                       help="start every worker in a sandbox of its own instead of forking it from a warm one "
                            "(slower; automatic where the kernel forbids nested namespaces)")
    grade.set_defaults(run=_grade)

    judge = commands.add_parser("_judge")  # internal: one judge process of 'grade --jobs N'
    judge.add_argument("manifest")
    judge.set_defaults(run=_judge)

    mrg = commands.add_parser("merge", parents=[lesson], help="combine the outputs of 'grade --shard I/N' runs")
    mrg.add_argument("shards", nargs="+", metavar="OUT_I", help="the shards' --out folders")
    mrg.add_argument("--out", required=True, metavar="OUT_DIR")
    mrg.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)
    mrg.set_defaults(run=_merge)

    gs = commands.add_parser("gradescope", parents=[lesson], help="write a Gradescope autograder zip")
    gs.add_argument("--to", required=True, metavar="ZIP")
    gs.set_defaults(run=_gradescope)

    gsr = commands.add_parser("gradescope-run", parents=[lesson], help="(inside Gradescope) grade ROOT/submission")
    gsr.add_argument("--root", default="/autograder")
    gsr.add_argument("--sandbox", default="isolated", choices=("isolated", "bwrap", "uid"),
                     help="never grades unisolated: fails when neither bwrap nor uid works (default isolated)")
    gsr.set_defaults(run=_gradescope_run)

    rub = commands.add_parser("rubric", parents=[lesson], help="write the rubric page from the hidden tests (names, points, no code)")
    rub.add_argument("--to", metavar="FILE", help="default: docs/rubric.md for the kit's own lesson, else rubric.md "
                     "in the lesson's folder")
    rub.set_defaults(run=_rubric)

    fig = commands.add_parser("figures", parents=[lesson], help="draw the guides' figures from the reference solutions")
    fig.add_argument("--to", metavar="DIR", help="default: docs/figures for the kit's own lesson, else figures/ in "
                     "the lesson's folder")
    fig.set_defaults(run=_figures)

    # "gradebook", its first name, still works; it never meant gradebook.csv, which grade writes.
    book = commands.add_parser("final-gradebook", aliases=["gradebook"], parents=[lesson],
                               help="after formgrader: fold the manual grades in, rewrite the reports and feedback, "
                               "write final_gradebook.csv (code + notebook)")
    book.add_argument("out_dir", metavar="OUT_DIR", help="the --out folder of a grade run")
    book.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)
    book.set_defaults(run=_final_gradebook)

    sim = commands.add_parser("similarity", parents=[lesson],
                              help="find the submissions that share code through an index of fingerprints (the "
                                   "released stubs and common passages left out): a ranked table, the top pairs side "
                                   "by side, in OUT_DIR, linked from its report.md")
    sim.add_argument("out_dir", metavar="OUT_DIR", help="the --out folder of a grade run: the report goes there")
    sim.add_argument("--class", dest="class_dir", required=True, metavar="CLASS_DIR",
                     help="the class folder that was graded: the files are read from it as grade reads them")
    sim.add_argument("--top", type=int, default=30,
                     help="rows listed in similarity.md and shown side by side (default 30; the CSV has all)")
    sim.add_argument("--max-share", type=float, metavar="FRACTION",
                     help="ignore passages more than this share of the class holds (default 0.1, and never fewer "
                          "than 5 submissions)")
    sim.add_argument("--boilerplate", action="append", default=[], metavar="FILE",
                     help="code every student may have (the lesson's posted code): left out, as the stubs are "
                          "(repeatable)")
    sim.add_argument("--shard", metavar="I/N", help="fingerprint only every N-th student, from the I-th: writes "
                     "OUT_DIR/similarity-shard-I-of-N.npz for --merge")
    sim.add_argument("--merge", nargs="+", default=[], metavar="SHARD",
                     help="write the report from every shard's file (or the folders holding them)")
    sim.set_defaults(run=_similarity)

    val = commands.add_parser("validate", parents=[lesson], help="grade the reference (full marks), the stubs (zero), the bug "
                              "catalogue (caught, diagnosis matrix) and the correct variants")
    val.add_argument("--sandbox", default="auto", choices=MODES)
    val.add_argument("--jobs", type=int, default=2)
    val.add_argument("--require-cuda", action="store_true",
                     help="the GPU check (make gpu-check): fail without CUDA, and on any GPU check skipped")
    val.set_defaults(run=_validate)

    modes = commands.add_parser("modes", parents=[lesson], help="grade the reference with its notebook in every "
                                "sandbox this machine offers; say which work and whether their outcomes agree")
    modes.set_defaults(run=_modes)

    back = commands.add_parser("return-feedback", parents=[lesson],
                               help="push each student's feedback to a branch of their own repository (origin)")
    back.add_argument("out_dir", metavar="OUT_DIR", help="the --out folder of a grade run")
    back.add_argument("--class", dest="class_dir", required=True, metavar="CLASS_DIR",
                      help="the class folder that was graded: each student's clone is found there")
    back.add_argument("--branch", default="feedback", help="the branch to push to (default feedback; it holds only "
                      "the feedback, replaced on every return)")
    back.add_argument("--dry-run", action="store_true", help="say where each student's feedback would go, push "
                      "nothing")
    back.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)
    back.set_defaults(run=_return_feedback)

    exp = commands.add_parser("export", parents=[lesson], help="write the grades of record as a CSV for an LMS "
                              "(Canvas's gradebook import, or a plain table)")
    exp.add_argument("out_dir", metavar="OUT_DIR", help="the --out folder of a grade run (after final-gradebook)")
    exp.add_argument("--to", required=True, metavar="FILE.csv", help="the CSV file to write")
    exp.add_argument("--format", default="canvas", help="canvas (default) or csv")
    exp.add_argument("--column", help="the assignment column's name (Canvas: \"Title (assignment id)\" matches an "
                     "existing assignment); default: the assignment's title")
    exp.add_argument("--allow-pending", action="store_true",
                     help="export even with written answers not graded yet (they count 0)")
    exp.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)
    exp.set_defaults(run=_export)

    demo = commands.add_parser("demo", parents=[lesson], help="run the kit's main job on the bundled material")
    demo.add_argument("--out", help="output folder, emptied first (default build/demo in the lesson's folder; the "
                      "kit's own lesson: build/demo in the kit)")
    demo.add_argument("--jobs", type=int, default=2, help="grading workers (default 2)")
    demo.add_argument("--sandbox", default="auto", choices=MODES,
                      help="auto: the strongest that works, else none, said above the scores (default auto)")
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
