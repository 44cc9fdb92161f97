"""Presentation: rich tables, markdown, CSV and JSON views of recorded results, one module per view."""
