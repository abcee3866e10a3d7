"""The sink atlas: the attention-sink diagnostics of one model (or two, side by side) as
per-head and per-layer tables and one offline interactive HTML page (docs/atlas.md)."""
