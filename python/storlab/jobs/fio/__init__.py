"""fio compatibility: fio's option names and what storlab does with each (options.py), and fio's
command line read into job sections (cmdline.py). The translator of job sections into storlab
phases is storlab.jobs.fiojob."""
