"""The training machinery of ``hcl pretrain``: the step, the epoch loop, probes, the training log and signals."""
