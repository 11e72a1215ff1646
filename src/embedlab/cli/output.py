"""The console the commands print their tables on (rich), alike for every command."""

from __future__ import annotations

import errno
import shutil
import sys
from typing import Any

import click

#: a terminal narrower than this still gets tables this wide (the terminal wraps the lines):
#: at 20 columns rich cut every cell to "…"
MIN_WIDTH = 60
#: the width of a table written to a pipe or a file: no cell cut or wrapped, so grep and cut
#: see whole rows
PIPE_WIDTH = 1000


def table_console() -> Any:
    """A rich ``Console`` on stdout for a command's tables.

    - Markup and highlighting off: a word or a run folder such as ``[the]`` or ``exp[v2]``
      prints as it is (``[/b]`` in a folder name stopped ``embedlab runs`` with a markup error);
      control codes and bidirectional overrides in them print escaped (``\\x1b``).
    - Not a terminal (``| grep``, ``> file``): :data:`PIPE_WIDTH` columns; a terminal: its width
      (``COLUMNS`` when set to a number > 0; ``COLUMNS=0`` printed nothing), at least
      :data:`MIN_WIDTH`.
    - A reader that closed the pipe (``| head -1``) ends the command as SIGPIPE would (141,
      see :func:`embedlab.cli.main`), not with rich's own exit status 1, which ``ckpt --verify``
      gives a failed checkpoint.
    """
    from rich.console import Console

    from embedlab.errors import printable

    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"

    def writable(text: str) -> str:
        """``text`` as the stream writes it: what its encoding lacks (café in ASCII) escaped
        here, so that the columns are measured on what is shown, not on the shorter text."""
        try:
            text.encode(encoding)
        except UnicodeEncodeError:
            return text.encode(encoding, "backslashreplace").decode(encoding)
        except LookupError:
            pass
        return text

    class _TableConsole(Console):
        def render_str(self, text: str, **how: Any) -> Any:
            # a word or a folder name holding ESC, a bidirectional override or a line break is
            # shown escaped, not acted on by the terminal (cells and printed lines come through
            # here, each one line)
            return super().render_str(writable(printable(text)), **how)

        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more to write there
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    out = sys.stdout
    tty = out is not None and out.isatty()
    width = max(shutil.get_terminal_size().columns, MIN_WIDTH) if tty else PIPE_WIDTH
    return _TableConsole(soft_wrap=True, highlight=False, markup=False, width=width)


def echo(message: str, *, err: bool = False) -> None:
    """``click.echo`` to the stream Python set up. Without a file, click replaces an ASCII
    stdout or stderr with a UTF-8 one of its own: those lines would be raw UTF-8 bytes
    while the rest of the output (tables, warnings) escaped what ASCII cannot write."""
    click.echo(message, file=sys.stderr if err else sys.stdout)
