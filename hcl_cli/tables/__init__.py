"""The papers' graph tables in the product (``hcl table``): which rows (:mod:`~hcl_cli.tables.methods`), one run of a
row (:mod:`~hcl_cli.tables.runs`), the results file's rows and intervals (:mod:`~hcl_cli.tables.summary`), the
tables as the README prints them (:mod:`~hcl_cli.tables.markdown`), and the rerun of seed 0 of every row
(:mod:`~hcl_cli.tables.verify`)."""
