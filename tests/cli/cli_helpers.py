"""What the CLI tests share: the toy run's argv (a scripted TEST DOUBLE backbone) and the one-line-error check."""
from pathlib import Path

from jitlab.cli import main

REPO = Path(__file__).resolve().parents[2]
RUN = ["run", "--suite", "toy", "--harness", "react", "--backbone", "scripted:pick-hash", "--no-cache"]


def one_line_error(capsys, argv, *needles):
    """Run the CLI in-process: exit code 2 and exactly one line on stderr, no traceback, naming ``needles``."""
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err
