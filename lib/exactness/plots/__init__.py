"""Figures for the notebooks: each function takes tables and returns a matplotlib Figure."""
