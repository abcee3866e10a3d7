"""Model inputs: token windows with the model's special tokens, seeded image crops."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO

from sinkscope.data import images, text
from sinkscope.data.inputs import text_table


class WordTokenizer:
    """A stand-in tokenizer: one id per word, with optional [CLS]/[SEP]-style specials."""

    def __init__(self, prefix=(), suffix=()):
        self.prefix, self.suffix = list(prefix), list(suffix)
        self.decoded = []

    def decode(self, ids):
        self.decoded.append(ids)
        return " ".join("w" * (i - 10) if i >= 10 else f"<{i}>" for i in ids)

    def __call__(self, string, add_special_tokens=True, verbose=True):
        ids = [len(word) + 10 for word in string.split()]
        ids = self.prefix + ids + self.suffix if add_special_tokens else ids

        class Encoding:
            input_ids = ids

        return Encoding()


def test_corpus_is_the_austen_novels():
    corpus = text.read_corpus(REPO / "data" / "austen.txt.xz")
    assert corpus.startswith("SENSE AND SENSIBILITY") and "Persuasion" in corpus
    assert len(corpus) > 4_000_000


def test_special_tokens_are_found_around_the_text():
    assert text.special_tokens(WordTokenizer([1], [2])) == ([1], [2])
    assert text.special_tokens(WordTokenizer([7])) == ([7], [])
    assert text.special_tokens(WordTokenizer()) == ([], [])


def test_windows_keep_length_specials_and_seed():
    corpus = " ".join("w" * (i % 7 + 1) for i in range(500))
    tokenizer = WordTokenizer([1], [2])
    windows, starts = text.token_windows(corpus, tokenizer, 12, 5, seed=3)
    assert windows.shape == (5, 12) and (windows[:, 0] == 1).all() and (windows[:, -1] == 2).all()
    stream = np.array(tokenizer(corpus, add_special_tokens=False).input_ids)
    for window, start in zip(windows, starts, strict=True):
        assert (window[1:-1] == stream[start : start + 10]).all()
    again, _ = text.token_windows(corpus, tokenizer, 12, 5, seed=3)
    assert (again == windows).all()
    other, _ = text.token_windows(corpus, tokenizer, 12, 5, seed=4)
    assert not (other == windows).all()


def test_models_without_tokenizer_read_bytes():
    windows, starts = text.token_windows("abcdefghij" * 10, None, 4, 3, seed=0)
    assert windows.shape == (3, 4) and windows.max() < 256
    assert (
        bytes(windows[0].astype(np.uint8))
        == ("abcdefghij" * 10).encode()[starts[0] : starts[0] + 4]
    )


def test_pieces_are_each_token_decoded_alone():
    tokenizer = WordTokenizer([1], [2])
    windows = np.array([[1, 12, 13, 2], [1, 13, 13, 2]])
    table = text_table(windows, np.array([0, 7]), tokenizer)
    assert table.pieces.tolist() == [["<1>", "ww", "www", "<2>"], ["<1>", "www", "www", "<2>"]]
    assert tokenizer.decoded == [[1], [2], [12], [13]]  # each distinct token once, alone
    assert table.start.tolist() == [0, 7] and table.unit.tolist() == table["sample"].tolist()
    assert text.token_pieces(np.array([[72, 105, 10]]), None) == [["H", "i", "\n"]]


def test_too_short_corpus_is_an_error():
    with pytest.raises(ValueError, match="cannot cut"):
        text.token_windows("a b c", WordTokenizer(), 10, 1, seed=0)


def test_crops_are_seeded_and_sized():
    photos = images.bundled_photos()
    assert len(photos) == 12 and all(p.ndim == 3 and p.shape[-1] == 3 for p in photos)
    crops = images.augmented_crops(photos, 6, 32, seed=0)
    assert crops.shape == (6, 32, 32, 3) and crops.dtype == np.uint8
    assert (images.augmented_crops(photos, 6, 32, seed=0) == crops).all()
    pixels = images.to_pixels(crops, [0.5] * 3, [0.25] * 3)
    assert pixels.shape == (6, 3, 32, 32)
    assert np.isclose(pixels.numpy().max(), (1 - 0.5) / 0.25)


def test_crops_name_the_photograph_they_were_cut_from():
    """Crop i is cut from photograph i mod 12 (the unit its statistics are bootstrapped over)."""
    assert images.crop_photographs(26, 12).tolist() == [*range(12), *range(12), 0, 1]


def test_imagenet_folder_missing_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="imagenet_val"):
        images.imagenet_val(tmp_path, 4, 32, seed=0)
