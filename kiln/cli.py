"""The `kiln` command."""

from __future__ import annotations

import argparse
import os
import sys

from kiln import judgecli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kiln", description="Sandboxed code-execution HTTP service")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the HTTP service (as root; configured by RUN_* variables)")
    slots = commands.add_parser("slots", help="show what each slot of a running kiln is doing")
    slots.add_argument("--watch", action="store_true", help="refresh every second, like top")
    slots.add_argument("--json", action="store_true", help="one JSON array per refresh, for scripts")
    slots.add_argument("--instance", help="RUN_INSTANCE of the kiln to look at (default: from the environment, else kiln)")
    check = commands.add_parser("check-host", help="which languages this host can serve, and why not")
    check.add_argument("--json", action="store_true")
    judgecli.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "check-host":
        from kiln import checkhost, config  # noqa: PLC0415
        from kiln.serve import REPO_ROOT  # noqa: PLC0415

        try:
            settings = config.load(dict(os.environ), REPO_ROOT)
        except config.ConfigError as error:
            print(f"kiln: bad configuration:\n{error}", file=sys.stderr)
            return 2
        return checkhost.main(settings, args.json)
    if args.command == "judge":
        return judgecli.main(args)
    if args.command == "serve":
        from kiln.serve import serve  # noqa: PLC0415

        return serve(dict(os.environ))
    if args.command == "slots":
        from kiln import slots as slots_view  # noqa: PLC0415

        return slots_view.main(args.instance or _instance(dict(os.environ)), args.watch, args.json)
    return 2


def _instance(environ: dict[str, str]) -> str:
    from kiln import config  # noqa: PLC0415
    from kiln.serve import REPO_ROOT  # noqa: PLC0415

    try:
        return config.load({k: v for k, v in environ.items() if k == "RUN_INSTANCE"}, REPO_ROOT).instance
    except config.ConfigError as error:
        raise SystemExit(f"kiln slots: {error}") from None


if __name__ == "__main__":
    sys.exit(main())
