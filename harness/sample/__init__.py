"""Samplers: one sample of a cell, by a real guest (images, vm, snapshot, protocol) or by replay."""
