"""Command line: `sinkscope audit FILE`, `sinkscope verify-model DIR`, `sinkscope check-config`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .audit import audit
from .config import ConfigError, load_config, validate_config
from .models import CorruptCache, verify_cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sinkscope", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    p_audit = commands.add_parser("audit", help="print the provenance chain of a figure or table")
    p_audit.add_argument("file", type=Path)
    p_verify = commands.add_parser(
        "verify-model", help="re-hash a cached model against its manifest"
    )
    p_verify.add_argument("cache_dir", type=Path)
    p_check = commands.add_parser("check-config", help="validate config files merged in order")
    p_check.add_argument("configs", type=Path, nargs="+")
    p_check.add_argument("--schema", type=Path, default=Path("config/schema.yaml"))
    args = parser.parse_args(argv)

    try:
        if args.command == "audit":
            if not args.file.exists():
                parser.error(f"{args.file} does not exist")
            print(args.file)
            print("\n".join(audit(args.file, "  ")))
        elif args.command == "verify-model":
            manifest = verify_cache(args.cache_dir, full=True)
            print(f"{args.cache_dir}: {len(manifest['files'])} files match the manifest")
        else:
            validate_config(load_config(args.configs), args.schema)
            print("configuration is valid")
    except (ConfigError, CorruptCache) as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
