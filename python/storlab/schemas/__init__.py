"""JSON Schemas of storlab result documents."""
