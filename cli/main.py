"""Root command group: global options, lazy command loading, error reporting and exit codes."""

from __future__ import annotations

import importlib
import sys
import traceback

import click

from commopt._version import __version__
from commopt.cli.app import App, echo
from commopt.errors import CommoptError, ExitCode

#: Command name -> "module:attribute". Modules load only when their command runs, so
#: ``commopt --help`` and light commands do not import torch.
COMMANDS: dict[str, str] = {
    "inspect": "commopt.cli.inspect_cmd:inspect_cmd",
    "convert": "commopt.cli.convert_cmd:convert_cmd",
    "capture": "commopt.cli.capture_cmd:capture_cmd",
    "estimate": "commopt.cli.estimate_cmd:estimate_cmd",
    "calibrate": "commopt.cli.calibrate_cmd:calibrate_cmd",
    "optimize": "commopt.cli.optimize_cmd:optimize_cmd",
    "verify": "commopt.cli.verify_cmd:verify_cmd",
    "passes": "commopt.cli.passes_cmd:passes_cmd",
    "plan": "commopt.cli.plan_cmd:plan_cmd",
    "verify-plan": "commopt.cli.verify_plan_cmd:verify_plan_cmd",
    "codegen": "commopt.cli.codegen_cmd:codegen_cmd",
    "report": "commopt.cli.report_cmd:report_cmd",
    "check": "commopt.cli.check_cmd:check_cmd",
    "config": "commopt.cli.config_cmd:config_cmd",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (missing modules are skipped)."""

    #: Set by ``--debug``: user errors show their traceback (and its cause) before the line.
    debug = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                return None
            raise
        return getattr(mod, attr)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run the CLI and map errors to exit codes (also under click's CliRunner).

        User errors (:class:`CommoptError`, click usage errors) are one line on stderr; any
        other exception is a bug: traceback and a request to report it. Global options may
        come after the command too (:func:`global_options_first`).
        """
        args = global_options_first(list(sys.argv[1:] if args is None else args))
        try:
            rv = super().main(args, "commopt", complete_var, standalone_mode=False, **extra)
        except CommoptError as exc:
            if self.debug:
                traceback.print_exception(exc)
            echo(f"commopt: error: {exc}", err=True, one_line=True)
            sys.exit(int(exc.exit_code))
        except click.exceptions.Abort:
            click.echo("commopt: aborted", err=True)
            sys.exit(int(ExitCode.USER_ERROR))
        except click.ClickException as exc:  # bad usage: one line too, with where to look
            hint = ""
            ctx = getattr(exc, "ctx", None)
            if ctx is not None:
                hint = f" (see '{ctx.command_path} --help')"
            message = " ".join(exc.format_message().split())
            echo(f"commopt: error: {message}{hint}", err=True, one_line=True)
            sys.exit(int(ExitCode.USER_ERROR))
        except KeyboardInterrupt:
            click.echo("commopt: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            sys.exit(0)
        except Exception:
            traceback.print_exc()
            click.echo(
                f"commopt: internal error: this is a bug in commopt {__version__}; please report "
                "it with the traceback above and the command you ran.",
                err=True,
            )
            sys.exit(int(ExitCode.INTERNAL_ERROR))
        sys.exit(int(rv) if isinstance(rv, int) else 0)

    def resolve_command(self, ctx, args):
        name = args[0] if args else None
        if name is not None and self.get_command(ctx, name) is None and not name.startswith("-"):
            from commopt.errors import suggest

            raise click.UsageError(f"no command {name!r}{suggest(name, self.list_commands(ctx))}")
        return super().resolve_command(ctx, args)


#: Options of the root command: name -> whether it takes a value.
GLOBAL_OPTIONS = {"-v": False, "--verbose": False, "-q": False, "--quiet": False, "--debug": False,
                  "--color": True}


def global_options_first(args: list[str]) -> list[str]:
    """``args`` with the global options that follow the command moved before it, so
    ``commopt optimize g.pt2 -o out -q`` works like ``commopt -q optimize ...``. Stops at
    ``--`` (what follows is never an option); stacked short flags (``-vv``, ``-qq``) count."""
    command, k = None, 0
    while k < len(args):  # the command: the first word that is not a global option or its value
        a = args[k]
        if a == "--":
            return args
        if not a.startswith("-"):
            command = k
            break
        k += 2 if GLOBAL_OPTIONS.get(a, False) else 1
    if command is None:
        return args
    moved, rest, k = [], args[:command + 1], command + 1
    while k < len(args):
        a = args[k]
        name = a.split("=", 1)[0]
        if a == "--":
            rest.extend(args[k:])
            break
        if name in GLOBAL_OPTIONS or (len(a) > 2 and a[0] == "-" and a[1] != "-"
                                      and set(a[1:]) <= {"v"} | {"q"}):
            takes = GLOBAL_OPTIONS.get(name, False) and "=" not in a
            moved.extend(args[k:k + 2] if takes else [a])
            k += 2 if takes else 1
            continue
        rest.append(a)
        k += 1
    return [*args[:command], *moved, *rest[command:]]


def _show_version(ctx: click.Context, _param: click.Parameter, asked: bool) -> None:
    """``--version``: print :func:`_version_message` and exit. Its message is made only when
    asked for: reading torch's metadata took 30-40 ms of every command's start."""
    if asked and not ctx.resilient_parsing:
        click.echo(_version_message())
        ctx.exit()


def _version_message() -> str:
    """commopt's, torch's and Python's versions (torch's from its metadata: no import)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "not installed"
    return f"commopt {__version__} (torch {torch_version}, Python {platform.python_version()})"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and exit.")
@click.option("-v", "--verbose", count=True, help="More diagnostics on stderr.")
@click.option("-q", "--quiet", count=True, help="Fewer diagnostics on stderr.")
@click.option("--debug", is_flag=True, help="Show the traceback of an error (e.g. a failing plug-in).")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour in terminal output (NO_COLOR is honoured in 'auto').",
)
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: int, debug: bool, color: str) -> None:
    """Reorder distributed PyTorch graphs so communication overlaps with compute."""
    type(ctx.command).debug = debug
    ctx.obj = App(verbosity=verbose - quiet, color=color, exit_follows=_exit_follows)


#: Whether the process ends as soon as :func:`main` returns (set by :func:`run`).
_exit_follows = False


def main(argv: list[str] | None = None) -> None:
    """Run the CLI on ``argv`` (default: the process's arguments); ends in ``SystemExit``
    with the exit code, so it can be called in-process (tests, other tools)."""
    cli.main(args=argv, prog_name="commopt")


def run() -> None:
    """The ``commopt`` console script and ``python -m commopt``: :func:`main`, then the
    process ends without freeing the command's objects one at a time.

    A 100k-node graph is millions of Python objects; tearing them down after the work is
    done took about as long as planning the buffers (seconds), and the operating system
    reclaims the memory at once. Every file is already written, closed and renamed by then;
    exit handlers still run and the standard streams are flushed. With other threads alive
    the exit is the ordinary one (it waits for them). Commands keep their results until
    then (:meth:`App.keep_until_exit`).
    """
    global _exit_follows
    _exit_follows = True
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    _exit_without_teardown(code)


def _exit_without_teardown(code: object) -> None:
    import atexit
    import os
    import threading

    if threading.active_count() > 1:
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): printed, status 1, as the interpreter does
        print(code, file=sys.stderr)
        status = 1
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_handlers is None:  # an interpreter without it: the ordinary exit
        sys.exit(status)
    run_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said
            pass
    os._exit(status)


if __name__ == "__main__":
    run()
