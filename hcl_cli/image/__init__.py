"""Images, the first modality: every image-specific piece behind :mod:`hcl_cli.modality`'s seam.

- :mod:`~hcl_cli.image.modality`: :data:`IMAGES`, the :class:`~hcl_cli.modality.Modality` the pipeline calls;
- :mod:`~hcl_cli.image.data`: the sources ``hcl prepare`` decodes (digits, CIFAR, STL-10, a folder of classes);
- :mod:`~hcl_cli.image.card`, :mod:`~hcl_cli.image.prepared`: the prepared folder's ``card.json`` and split files;
- :mod:`~hcl_cli.image.augment`: the batched on-device augmentations (the SimCLR and digits recipes;
  :mod:`~hcl_cli.image.simclr_augment`, the SimCLR recipe's ops);
- :mod:`~hcl_cli.image.networks`, :mod:`~hcl_cli.image.encoder`: the encoders with their projection head, and their artifact;
- :mod:`~hcl_cli.image.step`, :mod:`~hcl_cli.image.momentum`: one training step of two views, and MoCo's key encoder and queue.

It mirrors :mod:`hcl_cli.graph`, the second modality.
"""
