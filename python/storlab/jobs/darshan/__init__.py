"""Darshan logs as storlab jobs (`storlab replay`): log.py reads a log (PyDarshan, in a child
process: reader.py), counters.py counts requests as Darshan does, synth.py makes a request sequence
from a record's counters, stdio.py makes one from a STDIO record's stream calls, translator.py turns
the log into the job (one worker per file and rank)."""
