"""`python -m storlab` runs the command-line interface."""
from storlab.cli.main import main

raise SystemExit(main())
