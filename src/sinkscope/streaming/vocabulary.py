"""The byte-level vocabulary of the small LMs pretrained with sink variants (S6, S7): UTF-8
bytes are ids 0-255 and `SINK_TOKEN` (256), the learnable token the `sink_token` variant
prepends, is in every variant's vocabulary. Shared by their training and their evaluation."""

SINK_TOKEN = 256
