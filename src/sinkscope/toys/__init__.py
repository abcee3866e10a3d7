"""Small transformers trained on the synthetic tasks of seeds U and D (toys stage)."""
