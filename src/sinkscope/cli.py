"""Command line: `sinkscope audit FILE`, `sinkscope verify-model DIR`, `sinkscope check-config`,
`sinkscope atlas MODEL`, `sinkscope stream MODEL`.

A failure prints one message naming the file or key and what to do (exit status 1); `--debug`
shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import UserError

AUDIT_FAILED = 1  # exit status of an audit whose verdict is not `verified`
MODEL_HELP = (
    "a registry name, a model folder (Hugging Face, timm or sinkscope cache), a .gguf file, "
    "or a hub id owner/name"
)


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
    p_atlas.add_argument("model", help=MODEL_HELP)
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
    p_stream = commands.add_parser(
        "stream",
        parents=[common],
        help="score a long text, or generate from a prompt, through a sinks + window cache",
    )
    p_stream.add_argument("model", help=MODEL_HELP)
    source = p_stream.add_mutually_exclusive_group()
    source.add_argument(
        "--text",
        type=Path,
        metavar="FILE",
        help="text file to score (default: the configured corpus, streaming.text)",
    )
    source.add_argument("--prompt", metavar="TEXT", help="generate from this prompt instead")
    p_stream.add_argument(
        "--chat", action="store_true", help="render the prompt with the tokenizer's chat template"
    )
    p_stream.add_argument(
        "--cache",
        type=_sink_policy,
        default="4+1020",
        metavar="S+R",
        help="S sinks and R recent tokens (default: 4+1020)",
    )
    p_stream.add_argument(
        "--tokens",
        type=_positive,
        metavar="N",
        help="tokens to score (default: the whole text) or to generate (default: 256)",
    )
    p_stream.add_argument(
        "--out", type=Path, metavar="DIR", help="output folder (default: stream/<model>)"
    )
    p_stream.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="configuration for the registry and the corpus (default: config/config.yaml)",
    )
    return parser


def _sink_policy(text: str):
    from .streaming.policies import parse

    try:
        policy = parse(text)
    except ValueError:
        policy = None
    if policy is None or policy.kind != "cache":
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a sinks + window cache such as 4+1020 (sinks + recent tokens)"
        )
    return policy


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
    if args.command == "stream":
        return _stream(args)
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


def _stream(args: argparse.Namespace) -> int:
    """Open the model as `atlas` does, read the text, and stream it (streaming/command.py)."""
    from .atlas.command import check_out, config_file, folder_name
    from .atlas.load import open_model
    from .config import corpora, load_config, validate_config
    from .data.text import corpus_text, read_corpus
    from .device import resolve_device
    from .provenance import Recorder
    from .streaming.command import StreamRequest, run_stream

    if args.chat and args.prompt is None:
        raise UserError("--chat renders a prompt: give one with --prompt")
    path = config_file(args.config)
    config = load_config([path])
    validate_config(config, sources=[path])
    out = args.out or Path("stream") / folder_name(args.model)
    check_out(out)
    text, inputs = None, []
    if args.prompt is None:
        settings = config["streaming"]["text"]
        if args.text is not None:
            inputs = [args.text]
        elif settings["source"] == "file":
            inputs = [corpora(config, path.resolve().parent.parent)["streaming.text.file"]]
        text = read_corpus(inputs[0]) if inputs else corpus_text(settings)
    device = resolve_device(config["device"])
    opened = open_model(args.model, config, Path("resources/models"), device)
    if opened.modality != "text":
        raise UserError(f"{args.model}: an image model; stream takes a causal language model")
    request = StreamRequest(args.cache, out, args.tokens, text, args.prompt, args.chat)
    params = {"model": args.model, "cache": args.cache.name, "tokens": args.tokens,
              "prompt": args.prompt, "chat": args.chat}  # fmt: skip
    recorder = Recorder(rule="sinkscope stream", params=params, inputs=inputs,
                        code_dir=Path(__file__).parent, device=device,
                        models=[opened.record])  # fmt: skip
    for written in run_stream(opened.model, opened.tokenizer, opened.name, request, recorder):
        print(written)
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
