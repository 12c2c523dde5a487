"""What the commands share: exit codes, usage errors, policy and conventions flags, input caps.

A :class:`UsageError` raised anywhere under a command is printed on stderr by
:func:`otel_stall.cli.main` and exits 2. Heavy modules are imported where they
are used, so building the parser (``--version``, ``--help``) stays cheap.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from otel_stall.conventions import Conventions
    from otel_stall.core.errors import InputError
    from otel_stall.core.policy import StallPolicy
    from otel_stall.offline.replay import ReplayResult

__all__ = [
    "EXIT_OK",
    "EXIT_STALL",
    "EXIT_USAGE",
    "UsageError",
    "add_conventions_argument",
    "add_input_arguments",
    "add_policy_arguments",
    "conventions_from_args",
    "load_config",
    "no_spans",
    "policy_from_args",
    "print_errors",
]

EXIT_OK: Final = 0
EXIT_STALL: Final = 1
EXIT_USAGE: Final = 2


class UsageError(Exception):
    """Bad arguments or settings: printed on stderr, exit code 2."""


# -- policy -------------------------------------------------------------------------


def load_config(path: str) -> dict[str, Any]:
    """Read StallPolicy settings from a TOML or JSON file (a ``[policy]`` table is optional)."""
    from otel_stall.core.config import ConfigError, read_policy_file

    try:
        return read_policy_file(path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def policy_from_args(args: argparse.Namespace) -> StallPolicy:
    """Config file, then flags on top; ``OTEL_STALL_*`` fills what neither sets."""
    config: dict[str, Any] = load_config(args.config) if args.config else {}
    explicit = dict(config)
    for key in ("exempt_tools", "approval_tools"):
        value = explicit.get(key)
        if isinstance(value, str):
            explicit[key] = [v.strip() for v in value.split(",") if v.strip()]
    if args.exempt:
        explicit["exempt_tools"] = [*explicit.get("exempt_tools", ()), *args.exempt]
    if args.approval:
        explicit["approval_tools"] = [*explicit.get("approval_tools", ()), *args.approval]
    if args.threshold is not None:
        explicit["break_at"] = args.threshold
    if args.warn_at is not None:
        explicit["warn_at"] = args.warn_at
    if "tool_thresholds" in explicit and isinstance(explicit["tool_thresholds"], dict):
        explicit["tool_thresholds"] = {
            str(k): tuple(v) for k, v in explicit["tool_thresholds"].items()
        }
    from otel_stall.core.config import ConfigError
    from otel_stall.core.policy import StallPolicy

    try:
        return StallPolicy.from_env(**explicit)
    except ConfigError as exc:
        flagged = {"break_at": args.threshold, "warn_at": args.warn_at}
        from_file = set(config) - {name for name, value in flagged.items() if value is not None}
        raise UsageError(f"policy: {_flag_names(str(exc), from_file)}") from None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"policy: invalid setting ({exc})") from None


_POLICY_FLAGS: Final = {"break_at": "--threshold", "warn_at": "--warn-at"}
"""Policy settings with a flag of their own, by setting name."""


def _flag_names(message: str, from_file: Iterable[str]) -> str:
    """Name each setting by its flag, unless the config file set it (then its name is right)."""
    for name, flag in _POLICY_FLAGS.items():
        if name not in from_file:
            message = re.sub(rf"\b{name}\b", flag, message)
    return message


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``policy`` group (``replay``, ``compare``) and ``--conventions``."""
    group = parser.add_argument_group("policy")
    group.add_argument(
        "--exempt", action="append", default=[], metavar="TOOL", help="tool that repeats by design"
    )
    group.add_argument(
        "--approval", action="append", default=[], metavar="TOOL", help="tool with side effects"
    )
    group.add_argument(
        "--threshold", type=int, metavar="N", help="back-to-back repeats that break (break_at)"
    )
    group.add_argument("--warn-at", type=int, metavar="N", help="back-to-back repeats that warn")
    group.add_argument("--config", metavar="FILE", help="TOML or JSON file of policy settings")
    add_conventions_argument(parser)


def add_conventions_argument(parser: argparse.ArgumentParser) -> None:
    """``--conventions FILE``: a TOML mapping for spans no built-in convention reads."""
    parser.add_argument(
        "--conventions",
        metavar="FILE",
        help="TOML mapping of your own span conventions, added to the built-ins "
        "(default: $OTEL_STALL_CONVENTIONS); see docs/frameworks.md",
    )


def conventions_from_args(args: argparse.Namespace) -> Conventions:
    """The built-in conventions plus ``--conventions FILE`` (or ``OTEL_STALL_CONVENTIONS``)."""
    from otel_stall.conventions.user import conventions_from_file
    from otel_stall.core.config import ConfigError

    try:
        return conventions_from_file(getattr(args, "conventions", None))
    except ConfigError as exc:
        raise UsageError(f"conventions: {exc}") from None


# -- input ----------------------------------------------------------------------------


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-message-mib``: the cap on one line, document or inflated message."""
    from otel_stall.offline.readers import DEFAULT_MAX_MESSAGE

    parser.add_argument(
        "--max-message-mib",
        type=_mebibytes,
        default=DEFAULT_MAX_MESSAGE,
        metavar="N",
        help="skip, with an error, any line, document or inflated message over N MiB "
        f"(default: {DEFAULT_MAX_MESSAGE >> 20}; it bounds memory on compression bombs)",
    )


def _mebibytes(text: str) -> int:
    """``--max-message-mib``: a whole number of MiB, 1 to 1024, as bytes."""
    from otel_stall.offline.readers import MAX_MESSAGE

    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_MESSAGE >> 20:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 1024, got {text!r}")
    return value << 20


def print_errors(
    errors: Sequence[InputError], stderr: IO[str], skipped: Sequence[InputError] = ()
) -> None:
    """Input errors, then files skipped in directories (not errors: the exit code ignores them)."""
    from otel_stall.core.escape import printable

    for error in errors:
        print(f"otel-stall: {printable(str(error))}", file=stderr)
    for note in skipped:
        print(f"otel-stall: {printable(str(note))}; skipped", file=stderr)


def no_spans(result: ReplayResult, paths: Sequence[str], stderr: IO[str]) -> bool:
    """Say so when the inputs hold no span (nor tool call) at all: that is bad input."""
    from otel_stall.offline.readers import FORMATS_READ, STDIN
    from otel_stall.offline.replay import STDIN_LABEL

    if result.spans or result.tool_call_events:
        return False
    where = ", ".join(STDIN_LABEL if p == STDIN else p for p in paths)
    print(f"otel-stall: no spans found in {where}; otel-stall reads {FORMATS_READ}", file=stderr)
    return True
