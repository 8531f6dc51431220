"""Conformance suite: storlab and fio run side by side on the same small jobs, compared figure by figure.

cases.py holds the job table, tools.py runs the two tools (under strace for psync) and reads their
results into one shape, figures.py holds the definitions table that docs/fio.md is generated from.
"""
