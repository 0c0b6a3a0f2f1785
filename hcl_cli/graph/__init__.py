"""The graph modality: TU datasets, the papers' GIN encoder and their SVM protocol.

``tu.py`` reads a TU dataset's raw text files (from a ``.tar.gz`` archive or a folder) and checks
them; ``data.py`` turns them into a :class:`~hcl_cli.graph.data.GraphDataset` with the node
features of the papers' code and saves and loads it, with its card (``card.py``) and its
train/test split (``prepared.py``); ``batch.py`` gathers mini-batches; ``gin.py`` is InfoGraph's
GIN encoder with its FF heads (``encoder.py`` its artifact); ``step.py`` one training step;
``svm.py`` the papers' SVM evaluation; ``modality.py`` puts them behind the modality seam.
"""
