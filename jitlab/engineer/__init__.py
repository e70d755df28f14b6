"""Harness editing from failures (issue 13): failure packets, hooks.py patches, the engineer loop.

See README.md in this folder (one line per file) and :mod:`jitlab.engineer.loop` for the loop.
"""
