"""Command line: `sinkscope audit FILE`, `sinkscope verify-model DIR`, `sinkscope check-config`.

A failure prints one message naming the file or key and what to do (exit status 1); `--debug`
shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import UserError

AUDIT_FAILED = 1  # exit status of an audit whose verdict is not `verified`


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of a failure",
    )
    parser = argparse.ArgumentParser(prog="sinkscope", description=__doc__, parents=[common])
    commands = parser.add_subparsers(dest="command", required=True)
    p_audit = commands.add_parser(
        "audit",
        parents=[common],
        help="print and check the provenance chain of a figure or table (exit 1 unless verified)",
    )
    p_audit.add_argument("file", type=Path)
    p_verify = commands.add_parser(
        "verify-model", parents=[common], help="re-hash a cached model against its manifest"
    )
    p_verify.add_argument("cache_dir", type=Path)
    p_check = commands.add_parser(
        "check-config",
        parents=[common],
        help="validate config files merged in order (and the corpora they name)",
    )
    p_check.add_argument("configs", type=Path, nargs="+")
    p_check.add_argument("--schema", type=Path, default=None, help="default: the package's")
    return parser


def _run(args: argparse.Namespace) -> int:
    if args.command == "audit":
        from .audit import VERIFIED, audit_report

        lines, verdict = audit_report(args.file, "  ")
        print(args.file)
        print("\n".join(lines))
        print(f"verdict: {verdict}")
        return 0 if verdict == VERIFIED else AUDIT_FAILED
    if args.command == "verify-model":
        from .models.cache import verify_cache

        manifest = verify_cache(args.cache_dir, full=True)
        print(f"{args.cache_dir}: {len(manifest['files'])} files match the manifest")
        return 0
    from .config import check_corpora, load_config, validate_config

    config = load_config(args.configs)
    validate_config(config, args.schema, sources=args.configs)
    base = Path(args.configs[0]).resolve().parent.parent  # a relative corpus: the repository's
    check_corpora(config, base)
    print("configuration is valid")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return _run(args)
    except (UserError, OSError) as error:
        if debug:
            raise
        if isinstance(error, OSError) and error.filename:
            message = f"{error.filename}: {error.strerror or error}"
        else:
            message = str(error)
        print(f"sinkscope: {message}", file=sys.stderr)
    except Exception as error:
        if debug:
            raise
        from .errors import first_line

        print(
            f"sinkscope: internal error ({type(error).__name__}: {first_line(error)}); "
            "rerun with --debug for the traceback",
            file=sys.stderr,
        )
    except KeyboardInterrupt:
        print("sinkscope: interrupted", file=sys.stderr)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
