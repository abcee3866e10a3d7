"""Command line: `sinkscope audit FILE`, `sinkscope verify-model DIR`, `sinkscope check-config`,
`sinkscope atlas MODEL`.

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
    p_atlas = commands.add_parser(
        "atlas",
        parents=[common],
        help="the attention-sink diagnostics of a model as tables and an offline page",
    )
    p_atlas.add_argument(
        "model",
        help="a registry name, a model folder (Hugging Face, timm or sinkscope cache), "
        "a .gguf file, or a hub id owner/name",
    )
    p_atlas.add_argument("--compare", metavar="MODEL", help="a second model shown beside it")
    p_atlas.add_argument(
        "--text",
        type=Path,
        metavar="FILE",
        help="text file to cut the windows from (default: data.text)",
    )
    p_atlas.add_argument(
        "--images",
        type=Path,
        metavar="DIR",
        help="folder of images (default: the bundled photographs)",
    )
    p_atlas.add_argument(
        "--out", type=Path, metavar="DIR", help="output folder (default: atlas/<model>)"
    )
    p_atlas.add_argument(
        "--inputs",
        type=_positive,
        metavar="N",
        help="number of text windows or images (default: data.text.n_windows, "
        "data.images.n_images)",
    )
    p_atlas.add_argument(
        "--tokens",
        type=_positive,
        metavar="N",
        help="tokens per text window (default: data.text.window)",
    )
    p_atlas.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="configuration for the registry and the defaults (default: config/config.yaml)",
    )
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _run(args: argparse.Namespace) -> int:
    if args.command == "audit":
        from .audit import VERIFIED, audit_report

        lines, verdict = audit_report(args.file, "  ")
        print("\n".join([str(args.file), *lines, f"verdict: {verdict}"]))
        return 0 if verdict == VERIFIED else AUDIT_FAILED
    if args.command == "atlas":
        from .atlas.command import AtlasRequest, run_atlas

        models = [args.model] + ([args.compare] if args.compare else [])
        page = run_atlas(
            AtlasRequest(
                models, args.text, args.images, args.out, args.inputs, args.tokens, args.config
            )
        )
        print(page)
        return 0
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
