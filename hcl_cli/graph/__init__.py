"""The graph modality: TU datasets, the papers' GIN encoder and their SVM protocol.

``tu.py`` reads a TU dataset's raw text files (from a ``.tar.gz`` archive or a folder) and checks
them; ``data.py`` turns them into a :class:`~hcl_cli.graph.data.GraphDataset` with the node
features of the papers' code, saves and loads it, and gathers mini-batches; ``gin.py`` is
InfoGraph's GIN encoder with its FF heads; ``svm.py`` is the papers' SVM evaluation.
"""
