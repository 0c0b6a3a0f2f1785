"""hcl: contrastive representation learning with hard negative sampling, as a DVC pipeline."""

__version__ = "0.1.0"
