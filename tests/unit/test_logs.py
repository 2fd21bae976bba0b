"""Log lines go to the stderr logging was set up with, or the current one once that is closed."""

import io
import sys

import structlog

from pipeline.logs import configure_logging, get_logger


def test_logging_set_up_under_a_swapped_stderr_still_writes_after_it_is_closed(capsys) -> None:
    swapped, real = io.StringIO(), sys.stderr
    sys.stderr = swapped  # as a CLI runner does while a command runs in-process
    try:
        configure_logging("json")
        get_logger("t").warning("during_run")
    finally:
        sys.stderr = real
        swapped.close()
    try:
        get_logger("t").warning("after_run")  # before: ValueError, I/O operation on closed file
        assert "after_run" in capsys.readouterr().err
    finally:
        structlog.reset_defaults()
