"""The table's rows, one module per group; each has ``run(bench) -> list[Row]``."""

GROUPS = ("to-wheel", "cold", "rss", "check", "index", "install", "serve", "mirror")
