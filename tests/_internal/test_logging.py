"""Tests of nvmath._internal.logging: named loggers, phase timing and lazy DEBUG messages."""

from __future__ import annotations

import logging

import pytest

from nvmath._internal.logging import debug, get_logger, lazy, log_phase

NAME = "nvmath.tests.logging"


def test_named_logger_by_default():
    """Without a user logger the named module logger is returned, never the root logger."""
    log = get_logger(NAME)
    assert log is logging.getLogger(NAME) and log is not logging.getLogger()


def test_user_logger_wins():
    """The logger from options replaces the module logger."""
    mine = logging.getLogger("user.app")
    assert get_logger(NAME, mine) is mine
    adapter = logging.LoggerAdapter(mine, {})
    assert get_logger(NAME, adapter) is adapter


@pytest.mark.parametrize("name", ["", "root"])
def test_root_logger_refused(name):
    """Asking for the root logger by name raises ValueError."""
    with pytest.raises(ValueError, match="root logger"):
        get_logger(name)


def test_user_logger_type_checked():
    """A user logger of the wrong kind raises TypeError."""
    with pytest.raises(TypeError, match="logging.Logger"):
        get_logger(NAME, print)  # type: ignore[arg-type]


def test_phase_logs_elapsed_ms_at_info(caplog):
    """log_phase logs the start and the elapsed milliseconds at INFO."""
    log = logging.getLogger(NAME)
    with caplog.at_level(logging.INFO, logger=NAME), log_phase(log, "planning"):
        pass
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "planning: started"
    assert messages[1].startswith("planning: done in ") and messages[1].endswith(" ms")
    assert all(r.levelno == logging.INFO and r.name == NAME for r in caplog.records)


def test_phase_logs_failure_and_propagates(caplog):
    """A failing phase is logged as failed and the exception propagates."""
    log = logging.getLogger(NAME)
    with caplog.at_level(logging.INFO, logger=NAME), pytest.raises(KeyError), log_phase(log, "autotuning"):
        raise KeyError("x")
    assert "autotuning: failed after" in caplog.records[-1].getMessage()
    assert "KeyError" in caplog.records[-1].getMessage()


def test_phase_is_noop_when_disabled(caplog):
    """With INFO disabled the phase returns a shared no-op context and logs nothing."""
    log = logging.getLogger(NAME)
    with caplog.at_level(logging.WARNING, logger=NAME):
        first, second = log_phase(log, "a"), log_phase(log, "b")
        with first:
            pass
    assert first is second and not caplog.records


def test_phase_custom_level(caplog):
    """log_phase honours a custom level."""
    log = logging.getLogger(NAME)
    with caplog.at_level(logging.DEBUG, logger=NAME), log_phase(log, "execution", level=logging.DEBUG):
        pass
    assert caplog.records and all(r.levelno == logging.DEBUG for r in caplog.records)


def test_debug_is_lazy(caplog):
    """debug() evaluates Lazy arguments only when DEBUG is enabled."""
    calls = []

    def describe():
        calls.append(1)
        return "layout(2, 3)"

    log = logging.getLogger(NAME)
    with caplog.at_level(logging.INFO, logger=NAME):
        debug(log, "A is %s", lazy(describe))
    assert calls == [] and not caplog.records
    with caplog.at_level(logging.DEBUG, logger=NAME):
        debug(log, "A is %s (%r)", lazy(describe), lazy(lambda: "x"))
    assert calls == [1] and caplog.records[-1].getMessage() == "A is layout(2, 3) ('x')"
    assert caplog.records[-1].funcName == "test_debug_is_lazy"
