"""The ``dglctl`` command line: the root group, error rendering and exit codes."""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass

import click

from . import __version__
from .display import Display
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, DglctlError


@dataclass
class AppContext:
    """What every command gets in ``ctx.obj``."""

    debug: bool
    quiet: bool

    def display(self, json_mode: bool = False) -> Display:
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
    ctx.obj = AppContext(debug=debug, quiet=quiet)


def _register() -> None:
    from .commands import data, jobs

    for command in [*data.COMMANDS, *jobs.COMMANDS]:
        cli.add_command(command)


_register()


def _user_error(exc: BaseException) -> tuple[str, str | None] | None:
    """Message and hint if ``exc`` is an error the user can act on, else None."""
    if isinstance(exc, DglctlError):
        return exc.message, exc.hint
    # Imported lazily so that `dglctl --help` does not load numpy.
    if "partitioner" in sys.modules:
        from partitioner.errors import PartitionerError

        if isinstance(exc, PartitionerError):
            return exc.message, exc.hint
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turn errors into messages and exit codes."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    display = Display()
    try:
        cli.main(args=argv, prog_name="dglctl", standalone_mode=False)
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
        known = _user_error(e)
        if debug:
            traceback.print_exc()
        if known is not None:
            display.error(*known)
            return getattr(e, "exit_code", EXIT_USAGE)
        display.error(f"internal error: {type(e).__name__}: {e}",
                      None if debug else "run again with --debug for the traceback")
        return EXIT_INTERNAL
    return 0


if __name__ == "__main__":
    sys.exit(main())
