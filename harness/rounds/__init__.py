"""Cells through samplers into records: a cell's samples, a session on one runner."""
