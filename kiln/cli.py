"""The `kiln` command."""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kiln", description="Sandboxed code-execution HTTP service")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the HTTP service (as root; configured by RUN_* variables)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        from kiln.serve import serve  # noqa: PLC0415

        return serve(dict(os.environ))
    return 2


if __name__ == "__main__":
    sys.exit(main())
