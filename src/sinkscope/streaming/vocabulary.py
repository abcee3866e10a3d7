"""What the training and the evaluation of the small LMs pretrained with sink variants (S6, S7)
share: their byte-level vocabulary (UTF-8 bytes are ids 0-255, and `SINK_TOKEN` (256), the
learnable token the `sink_token` variant prepends, is in every variant's vocabulary), and the
names of what the pretraining logs of their sinks as they emerge (`EMERGENCE`)."""

SINK_TOKEN = 256

# what the pretraining of the byte-level LMs logs of their sinks as they emerge (S6)
EMERGENCE = ("first_token_mass", "first_token_sink_rate")
