"""Inputs of the analyses: long English text for the language models, images for the ViTs."""
