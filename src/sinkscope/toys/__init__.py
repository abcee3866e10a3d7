"""Small transformers trained on the synthetic tasks of the Unifying View and of Sink vs diagonal
(toys stage)."""
