"""`sinkscope stream MODEL` on a tiny local model: the per-token NLL it writes is the streaming
evaluation's, the text it generates is the token-by-token loop's greedy continuation, its memory
samples and figure are written, and bad arguments get one line."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import transformers
from conftest import REPO

from sinkscope.cli import main
from sinkscope.streaming import StreamingLM, nll_fast, parse

TEXT = "It is a truth universally acknowledged, that a single man in possession of a fortune. "

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(TEXT * 6)
    return path


def test_scoring_writes_the_streaming_nll_memory_and_figure(tiny_lm_folder, text_file, tmp_path,
                                                             capsys):  # fmt: skip
    out = tmp_path / "scored"
    args = ["stream", str(tiny_lm_folder), "--text", str(text_file), "--cache", "2+14"]
    assert main([*args, "--tokens", "300", "--out", str(out)]) == 0
    written = capsys.readouterr().out.split()
    assert written == [str(out / name) for name in
                       ["nll.parquet", "memory.parquet", "stream.png", "stream.pdf"]]  # fmt: skip
    table = pd.read_parquet(out / "nll.parquet")
    ids = torch.tensor(list((TEXT * 6).encode())[:300])  # the model reads bytes
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_lm_folder).eval()
    expected = nll_fast(model, ids, parse("2+14"))
    assert table.position.tolist() == list(range(1, 300))
    assert table.token.tolist() == ids[1:].tolist()
    assert (torch.tensor(table.nll.to_numpy()) - expected).abs().max() <= 1e-4
    memory = pd.read_parquet(out / "memory.parquet")
    assert len(memory) >= 2 and (memory.rss_mb > 0).all()
    assert memory.cache_tokens.max() == 15  # bounded: what the next query sees


def test_generation_continues_the_prompt_as_the_loop_does(tiny_lm_folder, tmp_path, capsys):
    out = tmp_path / "generated"
    args = ["stream", str(tiny_lm_folder), "--prompt", "Once upon", "--cache", "2+6"]
    assert main([*args, "--tokens", "20", "--out", str(out)]) == 0
    assert capsys.readouterr().out.split()[0] == str(out / "generated.txt")
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_lm_folder).eval()
    lm, tokens = StreamingLM(model, parse("2+6")), list(b"Once upon")
    for token in tokens[:-1]:
        lm.step(token)
    nll = []
    for _ in range(20):
        logits = lm.step(tokens[-1])
        tokens.append(int(logits.argmax()))
        nll.append(float(torch.logsumexp(logits, 0) - logits.max()))
    generated = bytes(tokens[9:]).decode("utf-8", errors="replace")
    assert (out / "generated.txt").read_text() == generated
    table = pd.read_parquet(out / "nll.parquet")
    assert table.token.tolist() == tokens[9:]
    assert (torch.tensor(table.nll.to_numpy()) - torch.tensor(nll)).abs().max() <= 1e-4
    assert (out / "stream.png").is_file()


CHAT = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


@pytest.fixture
def chat_folder(tiny_lm_folder, tmp_path):
    """The tiny model with a byte-level tokenizer (one id per byte) that has a chat template."""
    import shutil

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    folder = tmp_path / "tiny-chat"
    shutil.copytree(tiny_lm_folder, folder)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, chat_template=CHAT)
    fast.save_pretrained(folder)
    return folder


def test_a_chat_prompt_is_rendered_by_the_template(chat_folder, tmp_path):
    out = tmp_path / "chat"
    args = ["stream", str(chat_folder), "--prompt", "Hello", "--chat", "--cache", "2+6"]
    assert main([*args, "--tokens", "12", "--out", str(out)]) == 0
    tokenizer = transformers.AutoTokenizer.from_pretrained(chat_folder)
    messages = [{"role": "user", "content": "Hello"}]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert rendered == "<user>Hello\n<assistant>"
    model = transformers.AutoModelForCausalLM.from_pretrained(chat_folder).eval()
    lm, tokens = StreamingLM(model, parse("2+6")), tokenizer(rendered).input_ids
    for token in tokens[:-1]:
        lm.step(token)
    for _ in range(12):
        tokens.append(int(lm.step(tokens[-1]).argmax()))
    generated = pd.read_parquet(out / "nll.parquet").token.tolist()
    assert generated == tokens[-12:]
    assert (out / "generated.txt").read_text() == tokenizer.decode(generated)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cache", "4-10"], "argument --cache: '4-10' is not a sinks + window cache"),
        (["--cache", "full"], "argument --cache: 'full' is not a sinks + window cache"),
        (["--tokens", "0"], "argument --tokens: '0' is not a whole number of at least 1"),
        (["--prompt", "a", "--text", "t.txt"], "argument --text: not allowed with argument"),
    ],
)
def test_bad_arguments_are_one_line(tiny_lm_folder, args, message, capsys):
    with pytest.raises(SystemExit):
        main(["stream", str(tiny_lm_folder), *args])
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_bad_inputs_are_one_line(tiny_lm_folder, timm_folder, text_file, tmp_path, capsys):
    model, out = str(tiny_lm_folder), ["--out", str(tmp_path / "x")]
    cases = [
        (["--chat"], "sinkscope: --chat renders a prompt: give one with --prompt"),
        (["--prompt", "a", "--chat"], "sinkscope: --chat: this model reads bytes"),
        (["--text", str(text_file), "--tokens", "9999"],
         f"sinkscope: --tokens 9999: the text gives only {len(TEXT) * 6} tokens"),
        (["--text", str(tmp_path / "none.txt")],
         f"sinkscope: {tmp_path / 'none.txt'} does not exist"),
    ]  # fmt: skip
    for args, message in cases:
        assert main(["stream", model, *args, *out]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith(message), err
    assert main(["stream", str(timm_folder), "--prompt", "a", *out]) == 1
    assert "an image model; stream takes a causal language model" in capsys.readouterr().err


@pytest.mark.heavy
def test_the_generation_benchmark_runs_on_a_tiny_model(tiny_lm_folder, monkeypatch, capsys):
    """benchmarks/generation.py at a reduced size: both caches at one length, then the decoding
    latency of both policies at two cache sizes, every row measured."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import generation

    generation.main([str(tiny_lm_folder), "--lengths", "60", "--new", "4", "--cache", "2+14",
                     "--latency-caches", "8", "16", "--repeats", "1"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[2:5]] == [["60", "2+14"], ["60", "full"],
                                                         ["60", "ratio"]]  # fmt: skip
    assert [line.split()[0] for line in lines[-2:]] == ["8", "16"]
    assert all(line.endswith("x") for line in lines[-2:])
