"""Options and job parsing: option tables, TOML and fio job files, the default job."""
