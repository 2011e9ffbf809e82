"""`python -m popsnn` / `popsnn`: the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmake_dir() -> Path:
    """The folder that `find_package(popsnn CONFIG)` needs (like `pybind11 --cmakedir`)."""
    return Path(__file__).resolve().parent / "lib" / "cmake" / "popsnn"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="popsnn", description=__doc__)
    parser.add_argument(
        "--cmakedir",
        action="store_true",
        help="print the CMake package folder for find_package(popsnn CONFIG)",
    )
    parser.add_argument("--version", action="store_true", help="print the version")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    train_parser = commands.add_parser(
        "train", help="train a network (default: Sun et al.'s DSNN 784-1000-10 on MNIST)"
    )
    from .train_cli import add_arguments

    add_arguments(train_parser)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        valid = train_parser if args.command == "train" else parser
        flags = sorted(o for a in valid._actions for o in a.option_strings if o.startswith("--"))
        named = [u for u in unknown if u.startswith("-")] or unknown
        valid.error(f"unknown option(s) {' '.join(named)}; valid options: {', '.join(flags)}")
    if args.command == "train":
        from .train_cli import run_cli

        return run_cli(args)
    if args.cmakedir:
        path = cmake_dir()
        if not (path / "popsnnConfig.cmake").is_file():
            print(
                f"popsnn: no CMake package at {path}; reinstall popsnn with `pip install .`",
                file=sys.stderr,
            )
            return 1
        print(path)
        return 0
    if args.version:
        from . import __version__

        print(__version__)
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
