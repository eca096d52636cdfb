"""The ``neuroevo`` command line. Library code never prints; this edge module does."""

from __future__ import annotations

import argparse
import sys

import neuroevo


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuroevo",
        description="Pipelined CPU-GPU neuroevolution: Deep GA, OpenAI-ES and random search "
                    "on Atari, MuJoCo and gymnasium.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--version", action="version", version=f"neuroevo {neuroevo.__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
