"""Presentation of results beyond the terminal: charts (plot.py)."""
