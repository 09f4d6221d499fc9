"""The ``dglctl`` command line: the root group, error rendering and exit codes."""

from __future__ import annotations

import signal
import sys
import traceback
from dataclasses import dataclass

import click

from . import __version__
from .display import Display
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, GroupError, user_facing


@dataclass
class AppContext:
    """What every command gets in ``ctx.obj``."""

    debug: bool
    quiet: bool
    # The arguments dglctl was run with: a detached launch starts its supervisor with them.
    argv: tuple[str, ...] = ()

    def display(self, json_mode: bool = False) -> Display:
        """The display for a command (``json_mode``: stdout only for the JSON result)."""
        return Display(json_mode=json_mode, quiet=self.quiet or json_mode)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dglctl")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option("-q", "--quiet", is_flag=True, help="Only print results and errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool) -> None:
    """Partition graphs and run distributed GNN training on a cluster.

    \b
    Typical use:
      dglctl generate  --nodes 200000 --out data/demo.npz
      dglctl partition --input data/demo.npz --num-parts 2 --out parts/
      dglctl inspect   parts/
    """
    # main() hands its arguments in; else (click's own entry) they are the command line's.
    argv = ctx.obj.argv if isinstance(ctx.obj, AppContext) else tuple(sys.argv[1:])
    ctx.obj = AppContext(debug=debug, quiet=quiet, argv=argv)


def _register() -> None:
    from .commands import check, data, examples, jobs, launch, slurm

    for command in [*data.COMMANDS, *launch.COMMANDS, *check.COMMANDS, *jobs.COMMANDS,
                    *examples.COMMANDS, *slurm.COMMANDS]:
        cli.add_command(command)


_register()


def _print_traceback(exc: BaseException) -> None:
    """The traceback of ``exc``, and of each host's failure inside a GroupError."""
    traceback.print_exception(exc)
    if isinstance(exc, GroupError):
        for f in exc.failures:
            print(f"--- host {f.host}:", file=sys.stderr)
            traceback.print_exception(f.error)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turn errors into messages and exit codes."""
    args = list(argv if argv is not None else sys.argv[1:])
    debug = "--debug" in args
    # Ctrl-C, TERM and HUP reach dglctl even if it inherited them blocked (exec keeps the mask
    # of the thread that started it: e.g. a pool thread of a program that blocked them, as
    # `dglctl partition` does in its threads): 'logs -f' or a launch would never end on them.
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK,
                               {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    display = Display()
    try:
        # Outside standalone mode click returns an Exit's code instead of raising it.
        code = cli.main(args=args, prog_name="dglctl", standalone_mode=False,
                        obj=AppContext(debug=debug, quiet=False, argv=tuple(args)))
        if isinstance(code, int) and code:
            return code
    except click.exceptions.Abort:
        display.error("interrupted")
        return EXIT_INTERRUPTED
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Exit as e:
        return e.exit_code
    except KeyboardInterrupt:
        display.error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - the one place that renders every error
        # Any error with message and hint (dglctl's, the runtime's, the partitioner's) is the
        # user's to act on; it brings its exit code (2 when it has none).
        known = user_facing(e)
        if debug:
            _print_traceback(e)
        if known is not None:
            message, hint, code = known
            display.error(message, hint)
            return code
        display.error(f"internal error: {type(e).__name__}: {e}",
                      None if debug else "run again with --debug for the traceback")
        return EXIT_INTERNAL
    return 0


if __name__ == "__main__":
    sys.exit(main())
