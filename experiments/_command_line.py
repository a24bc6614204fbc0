"""A mistake on the command line as one line: every main composes its overrides once with Hydra's compose
API (about 0.1 s) before ``hydra.main`` does, so a value of the wrong type, a key the schema lacks or a group
option that does not exist is ``error: <what>`` and exit code 2, not Hydra's report of several lines. Checks
of a main's own (``experiments._policy.check_policy_overrides``) run first, sweeps (``-m``) included.
Runs with Hydra's own flags (``-m``, ``--cfg``, ``--config-name``, ...) are composed by Hydra alone, and
``HYDRA_FULL_ERROR=1`` leaves every error to Hydra (with its traceback), as ``_hydra.user_errors`` does."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException, MissingConfigException
from omegaconf.errors import OmegaConfBaseException

from experiments._hydra import CONF

# What a user's override can cause while composing (a main's own checks raise ValueError subclasses).
COMPOSE_ERRORS = (HydraException, OmegaConfBaseException, ValueError)


def override_error(exc: BaseException) -> str:
    """Hydra's report of a failed composition in one line: what failed, why (the cause's first line) and
    Hydra's hint, or the options a missing group option could have been."""
    text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = (lines[0] if lines else type(exc).__name__).rstrip(".")
    if isinstance(exc, MissingConfigException):  # "Available options in 'sandbox':" then one option a line
        options = [line.strip() for line in text.splitlines() if line.startswith("\t") and "=" not in line]
        return f"{head} (options: {', '.join(options)})" if options else head
    cause = exc.__cause__
    why = next((line.strip() for line in str(cause).splitlines() if line.strip()), "") if cause else ""
    hint = f" ({lines[1][0].lower()}{lines[1][1:]})" if len(lines) > 1 else ""
    return f"{head}: {why}{hint}" if why else f"{head}{hint}"


def compose_overrides(config_name: str, argv: list[str]) -> None:
    """Compose ``config_name`` with ``argv`` as Hydra will (raises what Hydra would report)."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        compose(config_name, overrides=argv)


def command_line_checked(config_name: str, *checks: Callable[[str, list[str]], None]):
    """Wrap a ``hydra.main``: ``checks`` (each ``check(config_name, argv)``), then the composition of plain
    overrides, before Hydra starts; a mistake is ``error: <line>`` on stderr and exit 2."""

    def wrap(main):
        @functools.wraps(main)
        def checked(*args, **kwargs):
            argv = sys.argv[1:]
            if os.environ.get("HYDRA_FULL_ERROR") != "1":
                try:
                    for check in checks:
                        check(config_name, argv)
                    if not any(arg.startswith("-") for arg in argv):
                        compose_overrides(config_name, argv)
                except COMPOSE_ERRORS as exc:
                    print(f"error: {override_error(exc)}", file=sys.stderr)
                    sys.exit(2)
            return main(*args, **kwargs)

        return checked

    return wrap
