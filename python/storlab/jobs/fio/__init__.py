"""fio compatibility, as one translator (jobs/translation.py): parse.py reads fio job files,
cmdline.py fio's command line, map.py gives the settings fio's semantics as storlab phases,
translator.py shapes them as storlab's job (`translate`, `--emit`, the recorded mapping), and
options.py says what storlab does with every fio option (docs/fio.md is generated from it)."""
