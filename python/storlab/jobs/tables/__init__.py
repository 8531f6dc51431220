"""Every command's option table, one module per command, each row with its category (as fio's
options.c and ripgrep's flag definitions): the CLI builds its flags from these (cli/options_cli.py),
the reference pages are rendered from them (cli/reference.py), and cli/ defines no row.

Each module holds `COMMANDS`, the `CommandTable`s of its command (and subcommands):
- run.py and meta.py: `storlab run` and `storlab meta`, whose rows are jobs/options.py's `OPTIONS`
  (beside the machinery every table shares) and jobs/meta_options.py's `META_OPTIONS`, because job
  files are read with them;
- sweep.py, scale.py, io500.py, replay.py, workload.py: the other commands that run a job, each with
  its own rows and the run rows it shares by name;
- plan.py, diagnose.py, doctor.py, results.py, report.py: the commands that model, inspect or read;
- shared.py: `CommandTable` (one command's rows), `command_row`, rows shared beyond run (`OUTPUT`).
(`storlab fio` takes fio's own command line: jobs/fio/cmdline.py and fio's table, jobs/fio/options.py.)

A flag has one meaning everywhere: a row used by several commands is the same object, and a command
taking several values of a flag (plan perf's --qd, --rw, --threads, --request) takes a list row
(`options.list_row`) derived from the row that takes one.
"""
