"""The IO500 benchmark on storlab's engine: io500's phases, stonewall, find, score and validity."""
